//! Where a guest call's wall time goes: running guest code, creating its instance, host work
//! inside imports (decoding, validation, grant checks, cache reads, encoding) and waiting on the
//! API server. A store accumulates a [`CostMeter`] during the call (one `Instant` pair per
//! import, two more per API round trip); the call hands back a [`CallCost`] that the plugin adds
//! to its counters once.

use std::time::{Duration, Instant};

/// The host imports, as labelled in `reconcile_host_plugin_import_seconds_total{import}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Import {
    /// `cache.get`.
    CacheGet,
    /// `cache.list`.
    CacheList,
    /// `client.apply`.
    ClientApply,
    /// `client.patch`.
    ClientPatch,
    /// `client.create`.
    ClientCreate,
    /// `client.replace`.
    ClientReplace,
    /// `client.delete`.
    ClientDelete,
    /// `client.get`.
    ClientGet,
    /// `events.record-event`.
    EventsRecordEvent,
    /// `log.log`.
    Log,
}

/// How many [`Import`]s there are.
pub const IMPORT_COUNT: usize = 10;

impl Import {
    /// Every import, in label order.
    pub const ALL: [Self; IMPORT_COUNT] = [
        Self::CacheGet,
        Self::CacheList,
        Self::ClientApply,
        Self::ClientPatch,
        Self::ClientCreate,
        Self::ClientReplace,
        Self::ClientDelete,
        Self::ClientGet,
        Self::EventsRecordEvent,
        Self::Log,
    ];

    /// The label: the WIT interface and function, e.g. `client.apply`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::CacheGet => "cache.get",
            Self::CacheList => "cache.list",
            Self::ClientApply => "client.apply",
            Self::ClientPatch => "client.patch",
            Self::ClientCreate => "client.create",
            Self::ClientReplace => "client.replace",
            Self::ClientDelete => "client.delete",
            Self::ClientGet => "client.get",
            Self::EventsRecordEvent => "events.record-event",
            Self::Log => "log.log",
        }
    }
}

/// What a store's imports have spent during the current call.
#[derive(Clone, Copy, Debug, Default)]
pub struct CostMeter {
    /// Wall time inside each import, API waits included.
    inside: [Duration; IMPORT_COUNT],
    /// Calls of each import.
    calls: [u32; IMPORT_COUNT],
    /// Time each import spent awaiting the API backend.
    waits: [Duration; IMPORT_COUNT],
}

impl CostMeter {
    /// Counts one call of `import` that began at `started` and ends now.
    pub fn import(&mut self, import: Import, started: Instant) {
        let i = import as usize;
        self.inside[i] += started.elapsed();
        self.calls[i] += 1;
    }

    /// Counts a wait of `import` on the API backend that began at `started` and ends now.
    pub fn api_wait(&mut self, import: Import, started: Instant) {
        self.waits[import as usize] += started.elapsed();
    }

    /// The call's cost, given the wall time of the `reconcile` export (`called`) and of the
    /// instantiation before it (zero on a reused instance).
    #[must_use]
    pub fn finish(&self, called: Duration, instantiate: Duration) -> CallCost {
        let inside: Duration = self.inside.iter().sum();
        let mut host = self.inside;
        for (host, wait) in host.iter_mut().zip(&self.waits) {
            *host = host.saturating_sub(*wait);
        }
        CallCost {
            guest: called.saturating_sub(inside),
            instantiate,
            host,
            calls: self.calls,
            api_wait: self.waits.iter().sum(),
        }
    }
}

/// Where one call's wall time went. `guest + host + api_wait` is the wall time of the
/// `reconcile` export; WASI calls (clocks, random, stdio) count as guest time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCost {
    /// Running guest code (and the host's lifting and lowering of the call and the imports).
    pub guest: Duration,
    /// Creating and starting the instance; zero on a reused instance.
    pub instantiate: Duration,
    /// Host work inside each import (by [`Import`] index), API waits excluded.
    pub host: [Duration; IMPORT_COUNT],
    /// Calls of each import (by [`Import`] index).
    pub calls: [u32; IMPORT_COUNT],
    /// Waiting on the API server: the round trips of `client` and `events` imports (request
    /// encoding, the plugin's rate limit and response decoding by the API client included).
    pub api_wait: Duration,
}

impl CallCost {
    /// Host work inside all imports.
    #[must_use]
    pub fn host_total(&self) -> Duration {
        self.host.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_waits_come_out_of_host_work_and_guest_time_is_the_rest() {
        let meter = CostMeter {
            inside: {
                let mut inside = [Duration::ZERO; IMPORT_COUNT];
                inside[Import::CacheGet as usize] = Duration::from_micros(5);
                inside[Import::ClientApply as usize] = Duration::from_micros(1_010);
                inside[Import::EventsRecordEvent as usize] = Duration::from_micros(520);
                inside
            },
            calls: {
                let mut calls = [0; IMPORT_COUNT];
                calls[Import::CacheGet as usize] = 1;
                calls[Import::ClientApply as usize] = 2;
                calls[Import::EventsRecordEvent as usize] = 1;
                calls
            },
            waits: {
                let mut waits = [Duration::ZERO; IMPORT_COUNT];
                waits[Import::ClientApply as usize] = Duration::from_micros(1_000);
                waits[Import::EventsRecordEvent as usize] = Duration::from_micros(500);
                waits
            },
        };
        let cost = meter.finish(Duration::from_micros(2_000), Duration::from_micros(7));
        assert_eq!(cost.guest, Duration::from_micros(2_000 - 5 - 1_010 - 520));
        assert_eq!(cost.api_wait, Duration::from_micros(1_500));
        assert_eq!(
            cost.host_total(),
            Duration::from_micros(5 + 1_010 + 520 - 1_500)
        );
        assert_eq!(
            cost.host[Import::CacheGet as usize],
            Duration::from_micros(5)
        );
        assert_eq!(
            cost.host[Import::ClientApply as usize],
            Duration::from_micros(10)
        );
        assert_eq!(cost.instantiate, Duration::from_micros(7));
        assert_eq!(cost.calls[Import::ClientApply as usize], 2);
        assert_eq!(
            cost.guest + cost.host_total() + cost.api_wait,
            Duration::from_micros(2_000)
        );
    }

    #[test]
    fn labels_follow_the_enum_order() {
        for (i, import) in Import::ALL.iter().enumerate() {
            assert_eq!(*import as usize, i, "{}", import.label());
        }
    }
}
