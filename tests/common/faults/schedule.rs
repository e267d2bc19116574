//! The random, seeded fault schedule: the same seed gives the same faults in the same order with
//! the same lengths (the processes' timing varies, as it does in a cluster).

use std::fmt;
use std::time::Duration;

/// splitmix64: small, fast, and the same on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 for a bound of 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next() % bound }
    }

    /// A duration between `low` and `high`.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let span = high.saturating_sub(low).as_millis() as u64;
        low + Duration::from_millis(self.below(span + 1))
    }
}

/// One fault; `pick` chooses among the replicas running when it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGSTOP a replica, SIGCONT after `length`.
    Freeze { pick: u64, length: Duration },
    /// A replica's (the leader's, in leader mode) connections are cut and its new ones held before their handshake for `hold`
    /// (shorter than its renew deadline, so its fence stays open); then it is frozen (SIGSTOP),
    /// the held connections let through, and it is continued (SIGCONT) after `length`. A
    /// request that was waiting for a connection is inside the replica, not on the wire, when
    /// another replica takes its work over.
    FreezeReconnecting {
        pick: u64,
        hold: Duration,
        length: Duration,
    },
    /// SIGKILL a replica; a new incarnation starts after `down`.
    Kill { pick: u64, down: Duration },
    /// SIGTERM a replica (it drains and leaves); a new incarnation starts after `down`, or
    /// never when `returns` is false and enough replicas remain.
    Leave {
        pick: u64,
        down: Duration,
        returns: bool,
    },
    /// A new replica joins (up to the most the run allows).
    Join,
    /// The API server answers nothing (SIGSTOP) for `length`.
    ApiFreeze { length: Duration },
    /// The proxy delays each chunk by up to `max` for `length`.
    Jitter { max: Duration, length: Duration },
    /// The proxy forwards nothing for `length`.
    Stall { length: Duration },
    /// The API server out of every replica's reach for two to five Leases: their connections
    /// held (nothing delivered), then cut. Every Lease lapses at once, and the replicas come
    /// back together to a backlog of changes (as after a long API server freeze, without its
    /// held requests arriving late).
    Outage { length: Duration },
    /// The proxy closes every replica's connection.
    Cut,
    /// Two busy processes share the replicas' cores for `length`.
    Contention { length: Duration },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Freeze { length, .. } => write!(f, "freeze {length:?}"),
            Self::FreezeReconnecting { hold, length, .. } => {
                write!(f, "connections held {hold:?}, then freeze {length:?}")
            }
            Self::Kill { down, .. } => write!(f, "kill, back after {down:?}"),
            Self::Leave { down, returns, .. } => {
                if *returns {
                    write!(f, "leave, back after {down:?}")
                } else {
                    write!(f, "leave")
                }
            }
            Self::Join => write!(f, "join"),
            Self::ApiFreeze { length } => write!(f, "API server frozen {length:?}"),
            Self::Jitter { max, length } => write!(f, "jitter up to {max:?} for {length:?}"),
            Self::Stall { length } => write!(f, "connections stalled {length:?}"),
            Self::Outage { length } => write!(f, "API server out of reach {length:?}"),
            Self::Cut => write!(f, "connections cut"),
            Self::Contention { length } => write!(f, "CPU contention {length:?}"),
        }
    }
}

/// One step: wait `gap`, then start `fault` (faults with a length run beside the next steps).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The pause before the fault.
    pub gap: Duration,
    /// The fault.
    pub fault: Fault,
}

/// The schedule of `seed` for a run of `total`, with faults sized to `lease` (the Lease
/// duration): freezes from a fifth of it to twice it, so some outlast it and some do not.
pub fn schedule(seed: u64, total: Duration, lease: Duration) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut steps = Vec::new();
    let mut at = Duration::ZERO;
    let short = lease / 5;
    loop {
        let gap = rng.between(lease / 8, lease);
        at += gap;
        if at >= total {
            return steps;
        }
        let pick = rng.next();
        let fault = match rng.below(100) {
            0..17 => Fault::Freeze {
                pick,
                length: rng.between(short, lease * 2),
            },
            17..25 => Fault::FreezeReconnecting {
                pick,
                hold: rng.between(lease / 10, lease / 4),
                length: rng.between(lease, lease * 2),
            },
            25..35 => Fault::Kill {
                pick,
                down: rng.between(short, lease),
            },
            35..45 => Fault::Leave {
                pick,
                down: rng.between(short, lease),
                returns: rng.below(3) > 0,
            },
            45..55 => Fault::Join,
            55..63 => Fault::ApiFreeze {
                length: rng.between(short, lease),
            },
            63..73 => Fault::Jitter {
                max: rng.between(Duration::from_millis(5), Duration::from_millis(300)),
                length: rng.between(short, lease * 2),
            },
            73..78 => Fault::Stall {
                length: rng.between(short, lease),
            },
            78..80 => Fault::Outage {
                length: rng.between(lease * 2, lease * 5),
            },
            80..87 => Fault::Cut,
            _ => Fault::Contention {
                length: rng.between(lease, lease * 3),
            },
        };
        steps.push(Step { gap, fault });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_seed_gives_one_schedule_and_seeds_differ() {
        use super::{Duration, Fault, schedule};
        let lease = Duration::from_secs(2);
        let total = Duration::from_secs(60);
        let one = schedule(7, total, lease);
        assert_eq!(one, schedule(7, total, lease));
        assert_ne!(one, schedule(8, total, lease));
        let span: Duration = one.iter().map(|s| s.gap).sum();
        assert!(span < total && span + lease >= total, "{span:?}");
        assert!(one.len() > 30, "{} steps", one.len());
        for step in &one {
            match step.fault {
                Fault::Freeze { length, .. } => {
                    assert!(length >= lease / 5 && length <= lease * 2);
                }
                Fault::Outage { length } => assert!(length >= lease * 2 && length <= lease * 5),
                _ => {}
            }
        }
        // Outages are drawn, and rarely: about 2 % of the faults over many schedules.
        let (mut faults, mut outages) = (0, 0);
        for seed in 1..=200 {
            for step in schedule(seed, total, lease) {
                faults += 1;
                outages += usize::from(matches!(step.fault, Fault::Outage { .. }));
            }
        }
        assert!(
            outages * 100 >= faults && outages * 100 <= faults * 4,
            "{outages} of {faults}"
        );
    }
}
