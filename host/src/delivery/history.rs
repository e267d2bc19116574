//! One plugin's reconcile history: the last reconciles of each key with their causes, outcome
//! and API calls, and the plugin's running totals; served on the telemetry port
//! ([`crate::telemetry::reconciles`]).
//!
//! # Bounds
//! [`PER_KEY`] reconciles per key, [`MAX_KEYS`] keys in [`SHARDS`] shards by the key's hash
//! (so that workers keeping entries of different keys rarely wait for one another): past a
//! shard's share, the eighth of its keys reconciled longest ago is forgotten at once (so keeping
//! an entry stays a map lookup and a ring push, with no order to maintain). An entry holds names, resourceVersions and error
//! texts (each cut), never an object's body.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::controller::ObjectKey;
use crate::controller::causes::{Cause, Taken, Why};
use crate::telemetry::reconciles::HistorySource;
use crate::wasm::api_notes::ApiNotes;
use crate::wasm::module::Module;

/// How many reconciles of one key are kept.
pub const PER_KEY: usize = 8;

/// How many keys' reconciles are kept.
pub const MAX_KEYS: usize = 4096;

/// How many parts the keys are kept in, each with its lock and `MAX_KEYS / SHARDS` keys.
pub const SHARDS: usize = 16;

/// The keys one shard keeps.
const SHARD_KEYS: usize = MAX_KEYS / SHARDS;

/// The shard of `key`: its hash (SipHash with fixed keys, the same in every process).
fn shard_of(key: &ObjectKey) -> usize {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    key.hash(&mut hasher);
    // The low bits of a 64-bit hash; SHARDS is far below 2^32.
    #[allow(clippy::cast_possible_truncation)]
    let shard = hasher.finish() as usize % SHARDS;
    shard
}

/// The longest error text an entry keeps.
const MAX_ERROR: usize = 1024;

/// How a reconcile ended, for the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Done.
    Success,
    /// Asked to run again soon.
    Requeue,
    /// Asked to run again after this delay.
    RequeueAfter(Duration),
    /// Failed: the reason label and the error text.
    Error(&'static str, String),
}

/// One reconcile.
#[derive(Debug)]
pub struct Entry {
    /// When it started.
    pub started: SystemTime,
    /// How long it took.
    pub took: Duration,
    /// The module that ran it.
    pub module: Option<Arc<Module>>,
    /// Whether the canary's module ran it.
    pub canary: bool,
    /// How many failures preceded it.
    pub retries: u32,
    /// Why it ran.
    pub causes: Arc<Taken>,
    /// How it ended.
    pub ended: Ended,
    /// The API calls it made.
    pub calls: ApiNotes,
    /// Its trace, when traced.
    pub trace_id: Option<String>,
}

impl Entry {
    fn to_json(&self) -> Value {
        let (outcome, detail) = match &self.ended {
            Ended::Success => ("success", None),
            Ended::Requeue => ("requeue", None),
            Ended::RequeueAfter(delay) => {
                ("requeue_after", Some(json!({"afterMs": millis(*delay)})))
            }
            Ended::Error(reason, text) => ("error", Some(json!({"reason": reason, "error": text}))),
        };
        let mut entry = json!({
            "started": timestamp(self.started),
            "durationMs": self.took.as_secs_f64() * 1000.0,
            "module": self.module.as_ref().map_or("", |module| module.digest()),
            "retries": self.retries,
            "outcome": outcome,
            "causes": self.causes.causes.iter().map(cause_json).collect::<Vec<_>>(),
            "calls": self.calls.calls,
        });
        let fields = entry.as_object_mut().expect("an object");
        if let Some(Value::Object(detail)) = detail {
            fields.extend(detail);
        }
        if self.causes.dropped > 0 {
            fields.insert("causesDropped".into(), json!(self.causes.dropped));
        }
        if self.calls.more > 0 {
            fields.insert("callsDropped".into(), json!(self.calls.more));
        }
        if self.canary {
            fields.insert("canary".into(), json!(true));
        }
        if let Some(trace_id) = &self.trace_id {
            fields.insert("traceId".into(), json!(trace_id));
        }
        entry
    }
}

fn millis(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

fn timestamp(at: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(at)
        .and_then(|at| at.round(k8s_openapi::jiff::Unit::Millisecond))
        .map(|at| at.to_string())
        .unwrap_or_default()
}

fn cause_json(cause: &Cause) -> Value {
    let mut out = json!({"why": cause.why.name(), "at": timestamp(cause.at)});
    let fields = out.as_object_mut().expect("an object");
    match &cause.why {
        Why::RequeueAfter(delay) => {
            fields.insert("afterMs".into(), json!(millis(*delay)));
        }
        Why::Retry(error) => {
            fields.insert("error".into(), json!(error));
        }
        Why::ModuleSwap(digest) => {
            fields.insert("module".into(), json!(digest));
        }
        _ => {}
    }
    if let Some(origin) = &cause.origin {
        let (namespace, name) = (origin.key.namespace(), origin.key.name());
        let mut object = json!({"kind": &*origin.kind, "name": name,
            "resourceVersion": origin.resource_version});
        if let Some(namespace) = namespace {
            object["namespace"] = json!(namespace);
        }
        fields.insert("object".into(), object);
    }
    if let Some(link) = &cause.link {
        fields.insert("traceId".into(), json!(link.trace_id().to_string()));
        fields.insert("spanId".into(), json!(link.span_id().to_string()));
    }
    out
}

/// What a key keeps.
#[derive(Debug, Default)]
struct KeyHistory {
    /// The order number of its latest reconcile.
    latest: u64,
    entries: VecDeque<Entry>,
}

#[derive(Debug, Default)]
struct Kept {
    keys: HashMap<ObjectKey, KeyHistory>,
    next: u64,
}

impl Kept {
    /// Forgets the eighth of the keys reconciled longest ago.
    fn evict(&mut self) {
        let mut latest: Vec<u64> = self.keys.values().map(|history| history.latest).collect();
        let cut = latest.len() / 8;
        if cut == 0 {
            return;
        }
        let (_, &mut oldest_kept, _) = latest.select_nth_unstable(cut);
        self.keys.retain(|_, history| history.latest >= oldest_kept);
    }
}

/// Reports the plugin's queue depth.
pub type DepthProbe = Box<dyn Fn() -> usize + Send + Sync>;

/// One plugin's history (see the module docs).
pub struct History {
    for_kind: String,
    shards: [Mutex<Kept>; SHARDS],
    reconciles: AtomicU64,
    errors: AtomicU64,
    busy_micros: AtomicU64,
    depth: Mutex<Option<DepthProbe>>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("for_kind", &self.for_kind)
            .field(
                "keys",
                &self
                    .shards
                    .iter()
                    .map(|s| s.lock().keys.len())
                    .sum::<usize>(),
            )
            .finish_non_exhaustive()
    }
}

impl History {
    /// An empty history of a plugin whose `for` kind is `for_kind` (`apiVersion/Kind`).
    #[must_use]
    pub fn new(for_kind: String) -> Self {
        Self {
            for_kind,
            shards: std::array::from_fn(|_| Mutex::default()),
            reconciles: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            busy_micros: AtomicU64::new(0),
            depth: Mutex::new(None),
        }
    }

    /// Reads the queue depth from `probe` (set once the plugin's controller runs).
    pub fn set_depth_probe(&self, probe: DepthProbe) {
        *self.depth.lock() = Some(probe);
    }

    /// Keeps `entry` as `key`'s latest reconcile.
    pub fn keep(&self, key: &ObjectKey, mut entry: Entry) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        if let Ended::Error(_, text) = &mut entry.ended {
            self.errors.fetch_add(1, Ordering::Relaxed);
            cut(text, MAX_ERROR);
        }
        let micros = u64::try_from(entry.took.as_micros()).unwrap_or(u64::MAX);
        self.busy_micros.fetch_add(micros, Ordering::Relaxed);
        let mut kept = self.shards[shard_of(key)].lock();
        let kept = &mut *kept;
        let order = kept.next;
        kept.next += 1;
        let history = match kept.keys.get_mut(key) {
            Some(history) => history,
            None => kept.keys.entry(key.clone()).or_insert_with(|| KeyHistory {
                latest: order,
                entries: VecDeque::new(),
            }),
        };
        history.latest = order;
        if history.entries.len() == PER_KEY {
            history.entries.pop_front();
        }
        history.entries.push_back(entry);
        if kept.keys.len() > SHARD_KEYS {
            kept.evict();
        }
    }

    /// The reconciles kept for `key`, newest first, as JSON.
    fn json_of(&self, key: &ObjectKey) -> Vec<Value> {
        self.shards[shard_of(key)]
            .lock()
            .keys
            .get(key)
            .map(|history| history.entries.iter().rev().map(Entry::to_json).collect())
            .unwrap_or_default()
    }
}

fn cut(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
}

impl HistorySource for History {
    fn for_kind(&self) -> String {
        self.for_kind.clone()
    }

    fn totals(&self) -> Value {
        let busy = self.busy_micros.load(Ordering::Relaxed);
        #[allow(clippy::cast_precision_loss)] // seconds for a human
        let busy_seconds = busy as f64 / 1e6;
        json!({
            "reconciles": self.reconciles.load(Ordering::Relaxed),
            "errors": self.errors.load(Ordering::Relaxed),
            "busySeconds": busy_seconds,
            "queueDepth": self.depth.lock().as_ref().map_or(0, |probe| probe()),
        })
    }

    fn of_key(&self, namespace: Option<&str>, name: &str) -> Vec<Value> {
        self.json_of(&ObjectKey::in_namespace(namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ended: Ended) -> Entry {
        Entry {
            started: SystemTime::now(),
            took: Duration::from_millis(3),
            module: None,
            canary: false,
            retries: 0,
            causes: Arc::new(Taken {
                causes: vec![Cause::now(Why::Requeue)],
                dropped: 0,
            }),
            ended,
            calls: ApiNotes::default(),
            trace_id: None,
        }
    }

    #[test]
    fn a_key_keeps_its_last_reconciles_newest_first() {
        let history = History::new("v1/ConfigMap".into());
        let key = ObjectKey::in_namespace(Some("ns"), "a");
        for _ in 0..PER_KEY + 2 {
            history.keep(&key, entry(Ended::Success));
        }
        history.keep(&key, entry(Ended::Error("error", "x".repeat(5000))));
        let json = history.of_key(Some("ns"), "a");
        assert_eq!(json.len(), PER_KEY);
        assert_eq!(json[0]["outcome"], "error");
        assert!(json[0]["error"].as_str().unwrap().len() <= MAX_ERROR + '…'.len_utf8());
        assert_eq!(json[1]["outcome"], "success");
        assert_eq!(json[0]["causes"][0]["why"], "requeue");
        let totals = history.totals();
        assert_eq!(totals["reconciles"], PER_KEY as u64 + 3);
        assert_eq!(totals["errors"], 1);
        assert!(history.of_key(Some("other"), "a").is_empty());
    }

    #[test]
    fn past_a_shards_share_of_keys_the_ones_reconciled_longest_ago_are_forgotten() {
        let history = History::new("v1/ConfigMap".into());
        // Keys of one shard, in the order they are first reconciled.
        let keys: Vec<ObjectKey> = (0..)
            .map(|i| ObjectKey::in_namespace(Some("ns"), &format!("k{i}")))
            .filter(|key| shard_of(key) == 3)
            .take(SHARD_KEYS + 1)
            .collect();
        for key in &keys[..SHARD_KEYS] {
            history.keep(key, entry(Ended::Success));
        }
        // k0 reconciles again: the next ones are now those reconciled longest ago.
        history.keep(&keys[0], entry(Ended::Requeue));
        history.keep(&keys[SHARD_KEYS], entry(Ended::Success));
        let held = |i: usize| history.json_of(&keys[i]).len();
        assert_eq!(held(0), 2, "reconciled recently: kept");
        assert_eq!(held(1), 0, "reconciled longest ago: forgotten");
        assert_eq!(held(SHARD_KEYS / 8), 0, "the oldest eighth goes at once");
        assert_eq!(held(SHARD_KEYS / 8 + 1), 1);
        assert_eq!(held(SHARD_KEYS), 1);
        assert_eq!(
            history.shards[3].lock().keys.len(),
            SHARD_KEYS + 1 - SHARD_KEYS / 8
        );
        let other = (0..)
            .map(|i| ObjectKey::in_namespace(Some("ns"), &format!("o{i}")))
            .find(|key| shard_of(key) != 3)
            .unwrap();
        history.keep(&other, entry(Ended::Success));
        assert_eq!(
            history.json_of(&other).len(),
            1,
            "another shard keeps its own keys"
        );
    }
}
