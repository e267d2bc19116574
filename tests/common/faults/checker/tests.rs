use super::*;

const WORK: u128 = 100_000;

fn rules(mode: Mode) -> Rules<'static> {
    Rules {
        mode,
        lease_name: "ring",
        plugin: "ledger",
        work_us: WORK,
    }
}

fn lease(rv: u64, name: &str, holder: Option<&str>, ack: Option<&str>) -> Change {
    Change::Lease {
        rv,
        name: name.to_owned(),
        holder: holder.map(str::to_owned),
        ack: ack.map(str::to_owned),
        deleted: false,
    }
}

fn deleted(rv: u64, name: &str) -> Change {
    Change::Lease {
        rv,
        name: name.to_owned(),
        holder: None,
        ack: None,
        deleted: true,
    }
}

fn write(rv: u64, key: &str, by: &str, begin_us: u128) -> Change {
    Change::Witness {
        rv,
        key: key.to_owned(),
        by: by.to_owned(),
        begin_us,
    }
}

#[test]
fn leader_mode_flags_writes_after_another_replica_took_the_lease() {
    let history = [
        write(1, "ns/a", "r1-0", 0),
        lease(2, "ring", Some("r1-0_x1"), None),
        write(3, "ns/a", "r1-0", 1_000_000),
        lease(4, "ring", Some("r2-0_x2"), None),
        write(5, "ns/b", "r1-0", 2_000_000),
        write(6, "ns/b", "r2-0", 3_000_000),
        lease(7, "ring", Some("r1-0_x1"), None),
        write(8, "ns/b", "r1-0", 4_000_000),
    ];
    let verdict = check(&history, &rules(Mode::Leader));
    assert_eq!(verdict.writes, 5);
    assert_eq!(verdict.late.len(), 2, "{:?}", verdict.late);
    assert!(
        verdict.late[0].contains("resourceVersion 1"),
        "{:?}",
        verdict.late
    );
    assert!(verdict.late[1].contains("ns/b written by r1-0 at resourceVersion 5"));
    assert!(verdict.late[1].contains("r2-0_x2"));
    assert!(verdict.overlaps.is_empty(), "{:?}", verdict.overlaps);
}

#[test]
fn sharded_mode_judges_each_write_by_the_last_ring_acknowledged_by_all_its_members() {
    let (a, b) = ("ring-r1-0_x1", "ring-r2-0_x2");
    let both = ring_id(&[a, b]);
    let alone = ring_id(&[a]);
    let key_of = |member: &str| {
        (0..1000)
            .map(|i| format!("ns/o{i}"))
            .find(|key| owner(&[a, b], "ledger", key) == Some(member))
            .expect("a key for each member")
    };
    let (ka, kb) = (key_of(a), key_of(b));
    let history = [
        lease(1, a, Some("r1-0_x1"), Some(&alone)),
        // r1 alone is stable: it may write either key.
        write(2, &kb, "r1-0", 0),
        lease(3, b, Some("r2-0_x2"), None),
        lease(4, a, Some("r1-0_x1"), Some(&both)),
        // Acknowledged by r1 only: {r1} is still the last stable ring.
        write(5, &kb, "r1-0", 1_000_000),
        lease(6, b, Some("r2-0_x2"), Some(&both)),
        // Now the ring of two is stable: kb is r2's.
        write(7, &kb, "r1-0", 2_000_000),
        write(8, &kb, "r2-0", 3_000_000),
        write(9, &ka, "r1-0", 3_000_000),
        deleted(10, a),
        write(11, &ka, "r1-0", 4_000_000),
    ];
    let verdict = check(&history, &rules(Mode::Sharded));
    assert_eq!(verdict.writes, 6);
    let late: Vec<&str> = verdict.late.iter().map(String::as_str).collect();
    assert_eq!(late.len(), 2, "{late:?}");
    assert!(
        late[0].contains("resourceVersion 7") && late[0].contains(b),
        "{late:?}"
    );
    assert!(
        late[1].contains("resourceVersion 11") && late[1].contains("deleted"),
        "{late:?}"
    );
}

#[test]
fn sharded_mode_flags_writes_before_any_ring_is_stable_and_by_replicas_off_the_ring() {
    let (a, b) = ("ring-r1-0_x1", "ring-r2-0_x2");
    let history = [
        lease(1, a, Some("r1-0_x1"), None),
        write(2, "ns/k", "r1-0", 0),
        lease(3, b, Some("r2-0_x2"), Some(&ring_id(&[b]))),
        // r2 saw r1's Lease lapse: only r2 is on the stable ring.
        write(4, "ns/k", "r1-0", 1_000_000),
        write(5, "ns/k", "r2-0", 2_000_000),
    ];
    let verdict = check(&history, &rules(Mode::Sharded));
    assert_eq!(verdict.late.len(), 2, "{:?}", verdict.late);
    assert!(verdict.late[0].contains("no ring was stable"));
    assert!(verdict.late[1].contains("gives the key to ring-r2-0_x2"));
}

#[test]
fn a_stale_ring_still_acknowledged_by_a_dead_lease_does_not_become_stable_again() {
    let (a, b, c) = ("ring-r1-0_x1", "ring-r2-0_x2", "ring-r3-0_x3");
    let pair = ring_id(&[a, b]);
    let history = [
        // r3 once thought it was alone and left that acknowledgement behind.
        lease(1, c, Some("r3-0_x3"), Some(&ring_id(&[c]))),
        lease(2, a, Some("r1-0_x1"), Some(&pair)),
        lease(3, b, Some("r2-0_x2"), Some(&pair)),
        // a renewal of r1 leaves {r1, r2} the last ring to become stable
        lease(4, a, Some("r1-0_x1"), Some(&pair)),
        write(5, "ns/k", "r1-0", 0),
        write(6, "ns/k", "r2-0", 1_000_000),
    ];
    let verdict = check(&history, &rules(Mode::Sharded));
    let members = [a, b];
    let owner = owner(&members, "ledger", "ns/k").expect("an owner");
    assert_eq!(verdict.late.len(), 1, "{:?}", verdict.late);
    let loser = if owner == a { "r2-0" } else { "r1-0" };
    assert!(verdict.late[0].contains(&format!("written by {loser}")));
}

#[test]
fn overlap_is_a_later_write_whose_reconcile_began_before_the_earlier_one_could_write() {
    let history = [
        write(1, "ns/k", "r1-0", 1_000_000),
        // began 50 ms after r1's began: r1 needed 100 ms before its write
        write(2, "ns/k", "r2-0", 1_050_000),
        // began before r1 but wrote after it: r1's reconcile ran inside r3's
        write(3, "ns/k", "r3-0", 900_000),
        // began after r1's earliest possible write and r3's: no overlap with either
        write(4, "ns/k", "r1-1", 1_200_000),
        // another key, same times: unrelated
        write(5, "ns/j", "r2-0", 1_000_000),
    ];
    let verdict = check(&history, &rules(Mode::Leader));
    assert_eq!(verdict.overlaps.len(), 3, "{:?}", verdict.overlaps);
    assert!(verdict.overlaps[0].starts_with("ns/k: r2-0"));
    assert!(
        verdict.overlaps[1].starts_with("ns/k: r3-0") && verdict.overlaps[1].contains("after r1-0")
    );
    assert!(
        verdict.overlaps[2].starts_with("ns/k: r3-0") && verdict.overlaps[2].contains("after r2-0")
    );
}

#[test]
fn incarnations_come_from_identities_and_lease_names() {
    assert_eq!(incarnation("r1-2_abc123", ""), "r1-2");
    assert_eq!(incarnation("ring-r1-2_abc123", "ring-"), "r1-2");
    assert_eq!(incarnation("ring-r1-2-abc123", "ring-"), "r1-2");
    assert_eq!(incarnation("plain", ""), "plain");
}
