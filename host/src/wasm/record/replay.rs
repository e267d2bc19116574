//! Replaying a [`Bundle`]: the guest runs again on the recorded request, every host import
//! answered from the recorded calls, the clocks and random sources from the recorded values;
//! what the guest does differently is reported.
//!
//! # Guarantees
//! - Nothing live is reached: no API server, no cache, no host clock or randomness. A replay of
//!   one bundle with one module prints the same report every time.
//! - A call the recording holds at that point (same import, same arguments) gets the recorded
//!   answer. A differing call is reported; it gets the answer of the first identical call
//!   recorded later, if any, else `call-error::unavailable`. Clocks and random bytes past the
//!   recorded ones continue deterministically (wall clock +1 ms a read, monotonic +1 µs,
//!   random bytes from a fixed-seed generator).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::bundle::{Bundle, HostCall, RecordedOutcome, unhex};

/// At most this many differences are reported (the count is always given).
pub const MAX_REPORTED: usize = 20;
/// Arguments and answers longer than this are cut in reports.
const MAX_SHOWN: usize = 300;

/// A call's answer meaning "not in the recording".
pub(crate) fn unavailable<T: DeserializeOwned>() -> T {
    serde_json::from_value(serde_json::json!({"Err": {"Unavailable":
        "replay: the recording holds no such call"}}))
    .expect("every recorded import answers a result with call-error")
}

/// The replay state of one call.
#[derive(Debug)]
pub struct Replaying {
    calls: Vec<HostCall>,
    used: Vec<bool>,
    cursor: usize,
    made: usize,
    differences: Vec<String>,
    difference_count: usize,
    wall: (Vec<u64>, usize, u64),
    monotonic: (Vec<u64>, usize, u64),
    random: (Vec<u8>, usize),
    insecure: (Vec<u8>, usize),
    fallback: u64,
}

fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= MAX_SHOWN {
        return text;
    }
    let mut end = MAX_SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn describe(call: &HostCall) -> String {
    format!("{} {}", call.import, shown(&call.args))
}

impl Replaying {
    /// The replay state of `bundle`.
    ///
    /// # Errors
    /// When the bundle's random bytes are not hex.
    pub fn new(bundle: &Bundle) -> Result<Self, String> {
        let bytes =
            |field: &str, text: &str| unhex(text).ok_or_else(|| format!("`{field}` is not hex"));
        let start = bundle.wall_clock.first().copied().unwrap_or(0);
        let mono_start = bundle.monotonic_clock.first().copied().unwrap_or(0);
        Ok(Self {
            used: vec![false; bundle.calls.len()],
            calls: bundle.calls.clone(),
            cursor: 0,
            made: 0,
            differences: Vec::new(),
            difference_count: 0,
            wall: (bundle.wall_clock.clone(), 0, start),
            monotonic: (bundle.monotonic_clock.clone(), 0, mono_start),
            random: (bytes("random", &bundle.random)?, 0),
            insecure: (bytes("insecureRandom", &bundle.insecure_random)?, 0),
            fallback: 0x5eed_5eed_5eed_5eed,
        })
    }

    fn differ(&mut self, text: String) {
        self.difference_count += 1;
        if self.differences.len() < MAX_REPORTED {
            self.differences.push(text);
        }
    }

    /// The answer to import `import` with `args` (see the module's Guarantees).
    pub(crate) fn answer<T: DeserializeOwned>(&mut self, import: &str, args: Value) -> T {
        self.made += 1;
        let matches = |call: &HostCall| call.import == import && call.args == args;
        let index = if self.calls.get(self.cursor).is_some_and(matches) {
            let index = self.cursor;
            self.cursor += 1;
            Some(index)
        } else {
            let made = HostCall {
                import: import.to_owned(),
                args: args.clone(),
                result: Value::Null,
            };
            let recorded = self
                .calls
                .get(self.cursor)
                .map_or_else(|| "no more calls".to_owned(), describe);
            self.differ(format!(
                "host call {}: recorded {recorded}; replayed {}",
                self.made,
                describe(&made)
            ));
            (self.cursor..self.calls.len()).find(|&i| !self.used[i] && matches(&self.calls[i]))
        };
        match index {
            Some(index) => {
                self.used[index] = true;
                serde_json::from_value(self.calls[index].result.clone())
                    .unwrap_or_else(|_| unavailable())
            }
            None => unavailable(),
        }
    }

    pub(crate) fn wall(&mut self) -> u64 {
        next_time(&mut self.wall, 1_000_000)
    }

    pub(crate) fn monotonic(&mut self) -> u64 {
        next_time(&mut self.monotonic, 1_000)
    }

    pub(crate) fn fill(&mut self, insecure: bool, dst: &mut [u8]) {
        let (bytes, position) = if insecure {
            &mut self.insecure
        } else {
            &mut self.random
        };
        for byte in dst {
            if let Some(recorded) = bytes.get(*position) {
                *byte = *recorded;
                *position += 1;
            } else {
                // splitmix64
                self.fallback = self.fallback.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.fallback;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                *byte = (z ^ (z >> 31)).to_le_bytes()[0];
            }
        }
    }

    /// Ends the replay: the differences, given the recorded and the replayed outcome.
    #[must_use]
    pub fn finish(mut self, recorded: &RecordedOutcome, replayed: &RecordedOutcome) -> Differences {
        if let Some(first) = (self.cursor..self.calls.len()).find(|&i| !self.used[i]) {
            let left = (self.cursor..self.calls.len())
                .filter(|&i| !self.used[i])
                .count();
            let text = format!(
                "host calls not made: {left} of the recorded ones, the first: {}",
                describe(&self.calls[first])
            );
            self.differ(text);
        }
        if recorded != replayed {
            self.differ(format!("outcome: recorded {recorded}; replayed {replayed}"));
        }
        Differences {
            calls: self.made,
            shown: self.differences,
            count: self.difference_count,
        }
    }
}

/// The next time of a recorded series: the recorded values in order, then the last one plus
/// `step` per read.
fn next_time(series: &mut (Vec<u64>, usize, u64), step: u64) -> u64 {
    let (values, position, last) = series;
    let value = match values.get(*position) {
        Some(value) => {
            *position += 1;
            *value
        }
        None => last.saturating_add(step),
    };
    *last = value;
    value
}

/// What a replay found.
#[derive(Debug, PartialEq, Eq)]
pub struct Differences {
    /// Host calls the replayed guest made.
    pub calls: usize,
    /// The first [`MAX_REPORTED`] differences, in order.
    pub shown: Vec<String>,
    /// How many differences there were.
    pub count: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(calls: Vec<HostCall>) -> Bundle {
        serde_json::from_value(serde_json::json!({
            "format": super::super::FORMAT, "plugin": "p", "moduleDigest": "ab", "modulePath": "/m.wasm",
            "manifest": {"apiVersion": "v1", "kind": "ConfigMap", "deadlineMs": 1000, "memory": 1048576, "env": []},
            "recordedAt": "2026-11-27T00:00:00Z", "freshInstance": true,
            "request": {"target": {"kind": {"api_version": "v1", "kind": "ConfigMap"}, "namespace": "d", "name": "x"},
                        "object": null, "requeues": 0},
            "calls": calls, "wallClock": [5, 9], "monotonicClock": [], "random": "0102", "insecureRandom": "",
            "insecureSeed": null, "outcome": {"type": "done"}, "truncated": false, "redacted": true,
        }))
        .expect("a bundle")
    }

    fn get(name: &str, answer: Value) -> HostCall {
        HostCall {
            import: "cache.get".to_owned(),
            args: serde_json::json!({"name": name}),
            result: answer,
        }
    }

    type Answer = Result<Option<String>, crate::wasm::bindings::CallError>;

    #[test]
    fn the_same_calls_get_the_recorded_answers_and_no_difference() {
        let recorded = vec![
            get("a", serde_json::json!({"Ok": "A"})),
            get("b", serde_json::json!({"Ok": null})),
        ];
        let mut replay = Replaying::new(&bundle(recorded)).unwrap();
        let a: Answer = replay.answer("cache.get", serde_json::json!({"name": "a"}));
        let b: Answer = replay.answer("cache.get", serde_json::json!({"name": "b"}));
        assert_eq!((a.unwrap(), b.unwrap()), (Some("A".to_owned()), None));
        assert_eq!(
            (replay.wall(), replay.wall(), replay.wall()),
            (5, 9, 1_000_009)
        );
        let mut bytes = [0; 3];
        replay.fill(false, &mut bytes);
        assert_eq!(&bytes[..2], [1, 2]);
        let found = replay.finish(&RecordedOutcome::Done, &RecordedOutcome::Done);
        assert_eq!(
            found,
            Differences {
                calls: 2,
                shown: vec![],
                count: 0
            }
        );
    }

    #[test]
    fn a_differing_call_and_outcome_are_reported_and_answered_from_later_or_unavailable() {
        let recorded = vec![
            get("a", serde_json::json!({"Ok": "A"})),
            get("b", serde_json::json!({"Ok": "B"})),
        ];
        let mut replay = Replaying::new(&bundle(recorded)).unwrap();
        let b: Answer = replay.answer("cache.get", serde_json::json!({"name": "b"}));
        assert_eq!(
            b.unwrap(),
            Some("B".to_owned()),
            "the identical call recorded later"
        );
        let z: Answer = replay.answer("cache.get", serde_json::json!({"name": "z"}));
        assert!(matches!(
            z,
            Err(crate::wasm::bindings::CallError::Unavailable(_))
        ));
        let error = RecordedOutcome::Error {
            message: "boom".to_owned(),
        };
        let found = replay.finish(&error, &RecordedOutcome::Done);
        assert_eq!(found.count, 4, "{:?}", found.shown);
        assert_eq!(
            found.shown[0],
            "host call 1: recorded cache.get {\"name\":\"a\"}; replayed cache.get {\"name\":\"b\"}"
        );
        assert!(
            found.shown[2].starts_with("host calls not made: 1"),
            "{}",
            found.shown[2]
        );
        assert_eq!(
            found.shown[3],
            "outcome: recorded error \"boom\"; replayed done"
        );
    }
}
