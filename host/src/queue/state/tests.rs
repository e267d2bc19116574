//! Tests of the queue's bookkeeping: slots, order, the two FIFOs.

use super::*;

fn cycle(state: &mut State<u32>, key: u32) {
    assert_eq!(state.add(key, None), Added::Queued);
    let (taken, _) = state.take(None).expect("queued");
    assert_eq!(taken, key);
    assert_eq!(state.done(&key), Finished::Released(None));
}

#[test]
fn a_finished_key_is_forgotten_and_its_slot_reused() {
    let mut state = State::new();
    for key in 0..1_000 {
        cycle(&mut state, key);
    }
    assert_eq!(state.live(), 0);
    assert_eq!(state.slots.len(), 1, "one slot served every key in turn");
    assert_eq!(
        state.done(&1),
        Finished::Ignored,
        "forgotten, not processing"
    );
}

#[test]
fn the_queue_holds_one_copy_of_a_key_and_lets_it_go_when_released() {
    use std::sync::Arc;
    let key: Arc<str> = "default/web".into();
    let mut state = State::new();
    state.add(Arc::clone(&key), None);
    assert_eq!(state.add(Arc::clone(&key), None), Added::Merged);
    assert_eq!(Arc::strong_count(&key), 2, "ours and the queue's");
    let (taken, _) = state.take(None).expect("queued");
    assert_eq!(Arc::strong_count(&key), 3, "and the worker's");
    assert_eq!(state.add(Arc::clone(&key), None), Added::Dirtied);
    assert_eq!(Arc::strong_count(&key), 3);
    assert!(matches!(state.done(&taken), Finished::Requeued(_)));
    drop(taken);
    let (again, _) = state.take(None).expect("re-queued");
    assert!(matches!(state.done(&again), Finished::Released(_)));
    drop(again);
    assert_eq!(Arc::strong_count(&key), 1, "released: the queue let go");
    state.add(Arc::clone(&key), None);
    assert_eq!(state.take_queued(), [Arc::clone(&key)]);
    assert_eq!((Arc::strong_count(&key), state.live()), (1, 0));
}

#[test]
fn done_on_a_queued_key_leaves_it_queued() {
    let mut state = State::new();
    state.add(7, None);
    assert_eq!(state.done(&7), Finished::Ignored);
    assert_eq!((state.len(), state.live()), (1, 1));
    assert_eq!(state.take(None).map(|(k, _)| k), Some(7));
    assert_eq!(state.done(&7), Finished::Released(None));
    assert_eq!(state.live(), 0);
}

#[test]
fn reused_slots_never_mix_up_keys() {
    let mut state = State::new();
    for key in 0..5_000 {
        state.add(key, None);
    }
    let taken: Vec<u32> = std::iter::from_fn(|| state.take(None).map(|(k, _)| k)).collect();
    assert_eq!(taken, (0..5_000).collect::<Vec<_>>());
    for key in (0..5_000).step_by(2) {
        assert_eq!(state.add(key, None), Added::Dirtied);
    }
    for key in &taken {
        let finished = state.done(key);
        if key % 2 == 0 {
            assert!(matches!(finished, Finished::Requeued(_)), "{key}");
        } else {
            assert!(matches!(finished, Finished::Released(_)), "{key}");
        }
    }
    for key in 5_000..7_500 {
        assert_eq!(state.add(key, None), Added::Queued);
    }
    let order: Vec<u32> = std::iter::from_fn(|| state.take(None).map(|(k, _)| k)).collect();
    let expected: Vec<u32> = (0..5_000).step_by(2).chain(5_000..7_500).collect();
    assert_eq!(order, expected);
    for key in &order {
        assert!(matches!(state.done(key), Finished::Released(_)));
    }
    assert_eq!((state.live(), state.processing), (0, 0));
    assert_eq!(state.slots.len(), 5_000, "slots freed by done are reused");
}

fn drain(state: &mut State<u32>) -> Vec<u32> {
    std::iter::from_fn(|| state.take(None).map(|(k, _)| k)).collect()
}

#[test]
fn later_keys_are_served_after_every_change_in_their_own_order() {
    let mut state = State::new();
    state.add_later(1, None);
    state.add_later(2, None);
    state.add(3, None);
    state.add_later(4, None);
    state.add(5, None);
    assert_eq!(state.len(), 5);
    assert_eq!(drain(&mut state), [3, 5, 1, 2, 4]);
    assert_eq!(state.len(), 0);
}

#[test]
fn a_change_moves_a_waiting_later_key_up_once() {
    let mut state = State::new();
    for key in 0..4 {
        state.add_later(key, None);
    }
    assert_eq!(state.add(2, None), Added::Merged);
    assert_eq!(state.add_later(2, None), Added::Merged, "stays up");
    assert_eq!(state.len(), 4, "still one entry per key");
    assert_eq!(drain(&mut state), [2, 0, 1, 3], "and handed out once");
    for key in 0..4 {
        assert!(matches!(state.done(&key), Finished::Released(_)));
    }
    assert_eq!((state.live(), state.processing), (0, 0));
}

#[test]
fn a_key_dirtied_while_processing_returns_to_the_fifo_of_its_last_kind_of_add() {
    let mut state = State::new();
    state.add(1, None);
    state.add(2, None);
    let taken = drain(&mut state);
    assert_eq!(state.add_later(1, None), Added::Dirtied);
    assert_eq!(state.add_later(2, None), Added::Dirtied);
    assert_eq!(
        state.add(2, None),
        Added::Merged,
        "a change wins over the later add"
    );
    state.add(3, None);
    for key in &taken {
        assert!(matches!(state.done(key), Finished::Requeued(_)));
    }
    assert_eq!(drain(&mut state), [3, 2, 1]);
}

#[test]
fn stale_entries_of_reused_slots_never_hand_out_a_key_twice() {
    let mut state = State::new();
    // Key 0 waits later, is moved up, taken and released: its slot is free, its later entry
    // stale. Key 1 reuses the slot as a later key: only its own entry may hand it out.
    state.add_later(0, None);
    state.add(0, None);
    assert_eq!(drain(&mut state), [0]);
    state.done(&0);
    state.add_later(1, None);
    state.add_later(2, None);
    assert_eq!(drain(&mut state), [1, 2]);
    assert_eq!(state.len(), 0);
}

#[test]
fn stale_entries_are_swept_while_changes_keep_the_later_fifo_waiting() {
    let mut state = State::new();
    for round in 0..10_000 {
        state.add_later(round % 8, None);
        state.add(round % 8, None);
    }
    assert!(
        state.later.len() <= 2 * state.queued_later + 65,
        "{}",
        state.later.len()
    );
    assert_eq!(drain(&mut state).len(), 8);
}

/// The state against a plain model (two FIFOs of keys, a set of keys being processed and a
/// map of dirty keys to whether their add was a later one) over random operations.
#[test]
fn the_two_fifos_agree_with_a_model_over_random_operations() {
    use std::collections::{HashMap, HashSet, VecDeque};
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    };
    let mut state = State::new();
    let (mut now, mut later): (VecDeque<u32>, VecDeque<u32>) = Default::default();
    let mut processing: HashSet<u32> = HashSet::new();
    let mut dirty: HashMap<u32, bool> = HashMap::new();
    for _ in 0..200_000 {
        let key = next(16) as u32;
        match next(4) {
            op @ (0 | 1) => {
                let is_later = op == 1;
                let was = dirty.get(&key).copied();
                let merged = if is_later {
                    state.add_later(key, None)
                } else {
                    state.add(key, None)
                };
                match was {
                    None => {
                        dirty.insert(key, is_later);
                        if processing.contains(&key) {
                            assert_eq!(merged, Added::Dirtied);
                        } else {
                            assert_eq!(merged, Added::Queued);
                            if is_later {
                                later.push_back(key)
                            } else {
                                now.push_back(key)
                            }
                        }
                    }
                    Some(was_later) => {
                        assert_eq!(merged, Added::Merged);
                        if was_later && !is_later {
                            dirty.insert(key, false);
                            if let Some(at) = later.iter().position(|&k| k == key) {
                                later.remove(at);
                                now.push_back(key);
                            }
                        }
                    }
                }
            }
            2 => {
                let expected = now.pop_front().or_else(|| later.pop_front());
                assert_eq!(state.take(None).map(|(k, _)| k), expected);
                if let Some(key) = expected {
                    dirty.remove(&key);
                    processing.insert(key);
                }
            }
            _ => {
                let finished = state.done(&key);
                if processing.remove(&key) {
                    match dirty.get(&key) {
                        Some(&is_later) => {
                            assert!(matches!(finished, Finished::Requeued(_)));
                            if is_later {
                                later.push_back(key)
                            } else {
                                now.push_back(key)
                            }
                        }
                        None => assert!(matches!(finished, Finished::Released(_))),
                    }
                } else {
                    assert_eq!(finished, Finished::Ignored);
                }
            }
        }
        assert_eq!(state.len(), now.len() + later.len());
    }
}

#[test]
fn a_wave_of_keys_leaves_no_slab_behind_once_the_queue_empties() {
    let mut state = State::new();
    let wave = 3 * KEEP_SLOTS as u32;
    for key in 0..wave {
        state.add_later(key, None);
    }
    let taken = drain(&mut state);
    for key in &taken[1..] {
        state.done(key);
    }
    assert_eq!(state.slots.len(), wave as usize, "one key still held: kept");
    state.done(&taken[0]);
    assert_eq!(
        (
            state.slots.capacity(),
            state.free.capacity(),
            state.later.capacity()
        ),
        (0, 0, 0),
        "given back"
    );
    cycle(&mut state, 1);
    assert_eq!(state.slots.len(), 1, "and grown again from nothing");
}
