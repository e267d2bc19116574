//! The flags of `check` and `reconcile`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plugin manifest (YAML) to check, with the component it names.
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Directory for compiled plugin modules [default: as `run`].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
    /// Also check, against the API server of this kubeconfig, that every kind the manifest
    /// names (`for`, `owns`, `cache`, grants) is served. Without it, `check` needs no cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The object `check` calls `reconcile` with once, of the manifest's `for` kind (YAML or
    /// JSON; `-`: stdin) [default: the first object of that kind in `samples/` beside the
    /// manifest, the others there filling the caches; else a minimal object of that kind,
    /// named `check-sample`]. Its
    /// calls are recorded, not applied; a reconcile that fails (an error, a denied call, a trap)
    /// fails `check` (exit 1).
    #[arg(long, value_name = "FILE")]
    pub sample: Option<PathBuf>,
    /// Pass when the sample reconcile returns an error or makes calls its grants deny (a trap,
    /// an overrun limit or a component that cannot start still fail).
    #[arg(long)]
    pub allow_failure: bool,
}

/// Arguments of `reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The plugin manifest (YAML).
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// The object to reconcile, of the manifest's `for` kind (YAML or JSON; `-`: stdin). Its
    /// metadata names the key.
    #[arg(long, value_name = "FILE")]
    pub object: PathBuf,
    /// Objects the guest's `cache` import reads and live `client.get` calls find: a YAML or
    /// JSON file (several documents or a `kind: List` allowed) or a directory of them (repeat
    /// for more).
    #[arg(long = "cache", value_name = "PATH")]
    pub cache: Vec<PathBuf>,
    /// `text` for people, `json` for tests.
    ///
    /// `json` prints one document, `{"action": ACTION or null, "error": "why the guest failed"
    /// or null, "calls": [CALL, ...], "denied": [CALL with "message", ...]}`. ACTION is
    /// `{"type": "done"}`, `{"type": "requeue"}` or `{"type": "requeue-after", "afterMs": N}`;
    /// CALL is `{"verb", "apiVersion", "kind", "namespace", "name", "subresource", "force",
    /// "patchType", "body"}`, null where a field does not apply.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// How many times in a row this key has failed before (the request's `requeues`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub requeues: u32,
    /// Directory for compiled plugin modules [default: as `run`].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
    /// Also write the reconcile as a recording bundle to this file, for `reconcile-host
    /// replay` (Secret values redacted).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// `replay`: re-runs a recorded reconcile.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The bundle (JSON) that a host (`GET /debug/recordings/<plugin>`, `--record-dir`) or
    /// `reconcile --record` wrote.
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// Run this component instead of the recorded module (to try a fix). Without it, the
    /// module is read from the path the bundle names and must be the recorded one.
    #[arg(long, value_name = "WASM")]
    pub module: Option<PathBuf>,
    /// Directory for compiled plugin modules [default: as `run`].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
}

/// How `reconcile` prints its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable.
    Text,
    /// One JSON document (described under `--output`).
    Json,
}
