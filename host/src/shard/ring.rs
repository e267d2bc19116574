//! The consistent-hash ring: which member owns a key, the same answer on every replica that
//! knows the same members.
//!
//! # Guarantees
//! - Deterministic across processes, builds and versions: the hash is FNV-1a (64 bits) with a
//!   splitmix64 finalizer, defined here, never `std`'s randomly keyed hasher.
//! - Each member holds [`VIRTUAL_NODES`] points; a member joining or leaving moves only the keys
//!   of the points it gains or loses (about `1/members` of them).

use std::sync::Arc;

/// Points each member holds on the ring.
pub const VIRTUAL_NODES: u32 = 128;

/// Names a ring: the same members give the same id on every replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ViewId(Arc<str>);

impl ViewId {
    /// The id as written into a membership Lease's annotation.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses an annotation value; `None` unless it is 16 lowercase hex digits.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 16 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(text.into()))
    }
}

impl std::fmt::Display for ViewId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A set of members and their points.
#[derive(Debug)]
pub struct Ring {
    id: ViewId,
    members: Vec<Arc<str>>,
    /// (point, index into `members`), sorted by point.
    points: Vec<(u64, u32)>,
}

impl Ring {
    /// The ring of `members` (order and duplicates do not matter).
    #[must_use]
    pub fn new<S: AsRef<str>>(members: impl IntoIterator<Item = S>) -> Self {
        let mut members: Vec<Arc<str>> = members.into_iter().map(|m| m.as_ref().into()).collect();
        members.sort();
        members.dedup();
        let mut points = Vec::with_capacity(members.len() * VIRTUAL_NODES as usize);
        for (index, member) in members.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            for vnode in 0..VIRTUAL_NODES {
                points.push((
                    hash(&[member.as_bytes(), b"#", &vnode.to_be_bytes()]),
                    index,
                ));
            }
        }
        points.sort_unstable();
        let mut id = Fnv::new();
        for member in &members {
            id.write(member.as_bytes());
            id.write(b"\n");
        }
        Self {
            id: ViewId(format!("{:016x}", finalize(id.0)).into()),
            members,
            points,
        }
    }

    /// The ring's id.
    #[must_use]
    pub fn id(&self) -> &ViewId {
        &self.id
    }

    /// The members, sorted.
    #[must_use]
    pub fn members(&self) -> &[Arc<str>] {
        &self.members
    }

    /// Whether `member` is on the ring.
    #[must_use]
    pub fn contains(&self, member: &str) -> bool {
        self.members.binary_search_by(|m| (**m).cmp(member)).is_ok()
    }

    /// The member owning `key` of `plugin`; `None` on an empty ring.
    #[must_use]
    pub fn owner(&self, plugin: &str, key: &str) -> Option<&str> {
        let point = hash(&[plugin.as_bytes(), b"\0", key.as_bytes()]);
        let at = self.points.partition_point(|(p, _)| *p < point);
        let (_, index) = self.points.get(at).or_else(|| self.points.first())?;
        self.members.get(*index as usize).map(|m| &**m)
    }
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// splitmix64's finalizer: FNV alone clusters short keys that differ in their last bytes.
fn finalize(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn hash(parts: &[&[u8]]) -> u64 {
    let mut fnv = Fnv::new();
    for part in parts {
        fnv.write(part);
    }
    finalize(fnv.0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn keys() -> impl Iterator<Item = String> {
        (0..30_000).map(|i| format!("ns-{}/object-{i}", i % 7))
    }

    #[test]
    fn the_answer_is_fixed_across_builds() {
        // Every replica, of every version, must agree: these values are part of the format.
        let ring = Ring::new(["b", "a", "c", "a"]);
        assert_eq!(ring.members().len(), 3);
        assert_eq!(ring.id().as_str(), "a69ac702acfd34eb");
        assert_eq!(Ring::new(["c", "b", "a"]).id(), ring.id());
        assert_eq!(ring.owner("website", "default/web"), Some("b"));
        assert_eq!(Ring::new(Vec::<String>::new()).owner("p", "k"), None);
        assert!(ViewId::parse(ring.id().as_str()).is_some());
        assert!(ViewId::parse("4D7D1F2C5B1CFB1F").is_none());
        assert!(ViewId::parse("x").is_none());
    }

    #[test]
    fn keys_spread_evenly() {
        let ring = Ring::new(["replica-a", "replica-b", "replica-c"]);
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for key in keys() {
            *counts
                .entry(ring.owner("p", &key).expect("owner"))
                .or_default() += 1;
        }
        for (member, count) in &counts {
            // 10,000 each when perfect; 128 points each keep it within 20 %.
            assert!(
                (8_000..=12_000).contains(count),
                "{member}: {count} of 30,000"
            );
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_keys_and_one_joining_takes_a_fair_share() {
        let three = Ring::new(["a", "b", "c"]);
        let two = Ring::new(["a", "b"]);
        let four = Ring::new(["a", "b", "c", "d"]);
        let mut moved_to_d = 0;
        for key in keys() {
            let before = three.owner("p", &key).expect("owner");
            if before != "c" {
                assert_eq!(two.owner("p", &key), Some(before), "{key} moved needlessly");
            }
            let after = four.owner("p", &key).expect("owner");
            if after == "d" {
                moved_to_d += 1;
            } else {
                assert_eq!(after, before, "{key} moved between old members");
            }
        }
        assert!(
            (5_500..=9_500).contains(&moved_to_d),
            "{moved_to_d} of 30,000 moved to d"
        );
    }

    #[test]
    fn plugins_hash_apart() {
        let ring = Ring::new(["a", "b", "c"]);
        let differ = keys()
            .take(1_000)
            .filter(|key| ring.owner("one", key) != ring.owner("two", key))
            .count();
        assert!(differ > 500, "{differ} of 1,000");
    }
}
