//! Sharded mode's ring as docs/sharding.md defines it, written again here so the checker judges
//! ownership without the host's code: FNV-1a (64 bits) with splitmix64's finalizer, 128 points
//! per member at `hash(member "#" vnode as 4 big-endian bytes)`, a key of a plugin at
//! `hash(plugin "\0" key)` owned by the first point at or after it (wrapping), and a ring's id the
//! hash of its sorted member names, each followed by a newline, as 16 hex digits.

const VIRTUAL_NODES: u32 = 128;

fn fnv(parts: &[&[u8]]) -> u64 {
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|part| part.iter()) {
        state ^= u64::from(*byte);
        state = state.wrapping_mul(0x0100_0000_01b3);
    }
    state
}

fn finalize(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn hash(parts: &[&[u8]]) -> u64 {
    finalize(fnv(parts))
}

/// The id a member writes into its Lease when it acknowledges the ring of `members`.
pub fn ring_id<S: AsRef<str>>(members: &[S]) -> String {
    let mut sorted: Vec<&str> = members.iter().map(AsRef::as_ref).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let text: String = sorted.iter().map(|m| format!("{m}\n")).collect();
    format!("{:016x}", hash(&[text.as_bytes()]))
}

/// The member of `members` owning `key` of `plugin`; `None` for no members.
pub fn owner<'a, S: AsRef<str>>(members: &'a [S], plugin: &str, key: &str) -> Option<&'a str> {
    let point = hash(&[plugin.as_bytes(), b"\0", key.as_bytes()]);
    let mut best: Option<(u64, &str)> = None;
    let mut lowest: Option<(u64, &str)> = None;
    for member in members.iter().map(AsRef::as_ref) {
        for vnode in 0..VIRTUAL_NODES {
            let at = hash(&[member.as_bytes(), b"#", &vnode.to_be_bytes()]);
            let candidate = (at, member);
            if at >= point && best.is_none_or(|b| candidate < b) {
                best = Some(candidate);
            }
            if lowest.is_none_or(|l| candidate < l) {
                lowest = Some(candidate);
            }
        }
    }
    best.or(lowest).map(|(_, member)| member)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ring_matches_the_documented_format() {
        use super::{owner, ring_id};
        // The values the host's own ring pins as part of the format.
        assert_eq!(ring_id(&["b", "a", "c", "a"]), "a69ac702acfd34eb");
        assert_eq!(owner(&["a", "b", "c"], "website", "default/web"), Some("b"));
        assert_eq!(owner::<&str>(&[], "p", "k"), None);
    }
}
