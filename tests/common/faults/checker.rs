//! The fault checker's judge: given what the API server recorded, in its own order, it finds
//! writes made after their writer's fence had closed and reconciles of one key that ran at once
//! on two replicas. It knows the protocol from docs/sharding.md and docs/configuration.md, not
//! the host's code (the ring is computed by [`super::ring`]).
//!
//! # The rules
//! - **Late write, leader mode.** A witness write by replica incarnation R is late when the
//!   server had already recorded, before it, a leader Lease naming another holder (or none): R's
//!   fence closed `leaseDuration - renewDeadline` before anyone could take the Lease.
//! - **Late write, sharded mode.** A ring is *stable* in the server's history from the change at
//!   which every Lease carrying its id belongs to it and all of its members carry it. A witness
//!   write of key k by R is late when the last ring to become stable before it does not give k
//!   to R's Lease (R acknowledged that ring only after narrowing to its keys and waiting for the
//!   reconciles outside them, or R was no member, so the others had seen its Lease lapse), when no
//!   ring was stable yet, or when R had deleted its own Lease (it closed its fence first).
//! - **Overlap.** Two witness writes of one key by different incarnations, the earlier begun at
//!   `b1`, the later at `b2`: if `b2 < b1 + work`, the later reconcile had begun before the
//!   earlier one could have written (each spends `work` before writing), so both ran at once
//!   and both wrote.
//!
//! Every rule can only miss, never invent: each names a moment at which the protocol forbids
//! the write, by the server's order or by one machine's wall clock.

use std::collections::{BTreeMap, BTreeSet};

use super::ring::{owner, ring_id};

/// How the replicas coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One holder of the Lease dispatches every key.
    Leader,
    /// Keys are placed on a ring of membership Leases.
    Sharded,
}

/// One change the server recorded, as the observer saw it.
#[derive(Clone, Debug)]
pub enum Change {
    /// A Lease in the Lease namespace was written or deleted.
    Lease {
        /// Its resourceVersion (etcd's revision: one order for every kind).
        rv: u64,
        /// Its name.
        name: String,
        /// `spec.holderIdentity`.
        holder: Option<String>,
        /// The acknowledged ring annotation.
        ack: Option<String>,
        /// Whether this was its deletion.
        deleted: bool,
    },
    /// The witness guest wrote its annotations on an object.
    Witness {
        /// The object's resourceVersion after the write.
        rv: u64,
        /// `namespace/name`.
        key: String,
        /// The writer: the replica incarnation's `REPLICA`.
        by: String,
        /// When that reconcile began, µs since the epoch.
        begin_us: u128,
    },
}

impl Change {
    /// The change's place in the server's order.
    pub fn rv(&self) -> u64 {
        match self {
            Self::Lease { rv, .. } | Self::Witness { rv, .. } => *rv,
        }
    }
}

/// What the checker needs besides the history.
pub struct Rules<'a> {
    /// Leader or sharded.
    pub mode: Mode,
    /// The leader Lease's name, or the ring's Leases' prefix (`<name>-`).
    pub lease_name: &'a str,
    /// The plugin whose keys are placed (the ring hashes it with the key).
    pub plugin: &'a str,
    /// The least time a reconcile spends before it writes, µs.
    pub work_us: u128,
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Witness writes checked.
    pub writes: usize,
    /// Lease changes seen.
    pub lease_changes: usize,
    /// Writes after the writer's fence closed, each described.
    pub late: Vec<String>,
    /// Pairs of writes whose reconciles ran at once, each described.
    pub overlaps: Vec<String>,
}

/// The replica incarnation an identity (`<HOSTNAME>_<random>`) or a membership Lease's name
/// (`<lease name>-<identity>`, the `_` made a `-`) belongs to.
pub fn incarnation<'a>(identity: &'a str, lease_prefix: &str) -> &'a str {
    let identity = identity.strip_prefix(lease_prefix).unwrap_or(identity);
    identity
        .rsplit_once(['_', '-'])
        .map_or(identity, |(host, _)| host)
}

/// Judges `history` (sorted by resourceVersion) by `rules`.
pub fn check(history: &[Change], rules: &Rules<'_>) -> Verdict {
    let mut verdict = Verdict::default();
    let prefix = format!("{}-", rules.lease_name);
    let mut leader: Option<String> = None;
    // Ring Leases: name → acknowledged ring.
    let mut members: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut stable: Option<Vec<String>> = None;
    let mut acknowledged: BTreeSet<String> = BTreeSet::new();
    let mut deleted_by: BTreeMap<String, u64> = BTreeMap::new();
    let mut writes: BTreeMap<&str, Vec<(&str, u128, u64)>> = BTreeMap::new();
    for change in history {
        match change {
            Change::Lease {
                rv,
                name,
                holder,
                ack,
                deleted,
            } => {
                verdict.lease_changes += 1;
                if rules.mode == Mode::Leader && name == rules.lease_name {
                    leader = if *deleted { None } else { holder.clone() };
                }
                if rules.mode == Mode::Sharded && name.starts_with(&prefix) {
                    if *deleted {
                        members.remove(name);
                        deleted_by.insert(incarnation(name, &prefix).to_owned(), *rv);
                    } else {
                        members.insert(name.clone(), ack.clone());
                    }
                    let now = acknowledged_rings(&members);
                    if let Some((_, ring)) = now.iter().find(|(id, _)| !acknowledged.contains(*id))
                    {
                        stable = Some(ring.clone());
                    }
                    acknowledged = now.into_keys().collect();
                }
            }
            Change::Witness {
                rv,
                key,
                by,
                begin_us,
            } => {
                verdict.writes += 1;
                let late = match rules.mode {
                    Mode::Leader => match &leader {
                        Some(holder) if incarnation(holder, "") == by => None,
                        Some(holder) => Some(format!("the leader Lease named {holder}")),
                        None => Some("no replica held the leader Lease".to_owned()),
                    },
                    Mode::Sharded => sharded_late(
                        stable.as_deref(),
                        deleted_by.get(by.as_str()),
                        rules,
                        &prefix,
                        key,
                        by,
                    ),
                };
                if let Some(why) = late {
                    verdict.late.push(format!(
                        "{key} written by {by} at resourceVersion {rv}: {why}"
                    ));
                }
                let earlier = writes.entry(key.as_str()).or_default();
                for (other, other_begin, other_rv) in earlier.iter() {
                    if *other != by && *begin_us < other_begin + rules.work_us {
                        verdict.overlaps.push(format!(
                            "{key}: {by} began at {begin_us} µs and wrote at resourceVersion \
                             {rv}, after {other} (began at {other_begin} µs, wrote at \
                             {other_rv}) and within {} µs of that begin",
                            rules.work_us
                        ));
                    }
                }
                earlier.push((by.as_str(), *begin_us, *rv));
            }
        }
    }
    verdict
}

/// Why a sharded write is late, if it is.
fn sharded_late(
    stable: Option<&[String]>,
    deleted_at: Option<&u64>,
    rules: &Rules<'_>,
    prefix: &str,
    key: &str,
    by: &str,
) -> Option<String> {
    if let Some(at) = deleted_at {
        return Some(format!(
            "its membership Lease was deleted at resourceVersion {at}"
        ));
    }
    let Some(ring) = stable else {
        return Some("no ring was stable yet".to_owned());
    };
    match owner(ring, rules.plugin, key) {
        Some(member) if incarnation(member, prefix) == by => None,
        Some(member) => Some(format!(
            "the last stable ring ({} members) gives the key to {member}",
            ring.len()
        )),
        None => Some("the last stable ring is empty".to_owned()),
    }
}

/// The rings every member of which acknowledges them, and which no other Lease acknowledges, in
/// `members`' state: id → members.
fn acknowledged_rings(members: &BTreeMap<String, Option<String>>) -> BTreeMap<String, Vec<String>> {
    let mut by_ack: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, ack) in members {
        if let Some(ack) = ack {
            by_ack.entry(ack.clone()).or_default().push(name.clone());
        }
    }
    by_ack.retain(|id, ring| ring_id(ring) == *id);
    by_ack
}

#[cfg(test)]
#[path = "checker/tests.rs"]
mod tests;
