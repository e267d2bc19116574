//! `check` and `reconcile`: tools for plugin authors, with no cluster — validate a manifest and
//! its component, and run one reconcile against object files, recording the calls it makes.
//!
//! # `reconcile --output json`
//! One JSON document, with these fields (stable; plugin authors' tests may rely on them):
//!
//! ```json
//! {
//!   "action": {"type": "requeue-after", "afterMs": 60000},
//!   "error": null,
//!   "calls": [{"verb": "apply", "apiVersion": "apps/v1", "kind": "Deployment",
//!              "namespace": "default", "name": "web", "subresource": null,
//!              "force": true, "patchType": null, "body": {"apiVersion": "apps/v1", "...": "..."}}],
//!   "denied": [{"verb": "get", "apiVersion": "v1", "kind": "Secret", "...": "...",
//!               "message": "plugin `web` has no grant to `get` v1 Secret in namespace ..."}]
//! }
//! ```
//!
//! - `action`: what the guest returned — `{"type": "done"}`, `{"type": "requeue"}` or
//!   `{"type": "requeue-after", "afterMs": <u32>}` — or `null` when it failed.
//! - `error`: `null`, or why the guest failed (returned `err`, trapped, overran its deadline or
//!   memory limit), with the cause chain.
//! - `calls`: every `client` and `events` call the grants allowed, in order; recorded, not
//!   applied (see [`CallRecord`]).
//! - `denied`: every `client` call the grants refused, in order: the fields of a call plus
//!   `message`, the `call-error::denied` text the guest got (see [`DeniedRecord`]).
//!
//! # Guarantees
//! The guest runs as in the host: same engine, limits, WASI context and host imports, its logs
//! on stderr. Only where its calls go differs: live reads answer from the `--cache` files and
//! the object, writes answer with what was sent (a patch: with the object patched, unchanged).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tracing::Instrument;

use crate::cli::EXIT_CONFIG;
use crate::config::HostConfig;
use crate::controller::ObjectKey;
use crate::informer::{CachedObject, Store};
use crate::plugin::api::{ApiCall, PatchDoc, Recorder, SharedApi};
use crate::plugin::context::PluginContext;
use crate::plugin::engine::{EngineError, EngineSettings, PluginEngine};
use crate::plugin::loader::cache_scopes;
use crate::plugin::manifest::{Grant, Manifest};
use crate::plugin::module::{Module, ModuleLoader};
use crate::plugin::reconciler::Plugin;
use crate::plugin::{GuestAction, Kind, ObjectRef};
use crate::runtime::KindRef;
use label_selector::LabelSelector;

/// Exit code of `reconcile` when the guest failed (returned `err`, trapped, overran a limit).
pub const EXIT_GUEST_FAILED: u8 = 1;

/// The `client` import, which needs grants.
const CLIENT_IMPORT: &str = "kube:reconcile/client@";

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plugin manifest (YAML) to check, with the component it names.
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Directory for compiled plugin modules [default: as `run`].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
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
}

/// How `reconcile` prints its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable.
    Text,
    /// One JSON document (described under `--output`).
    Json,
}

/// `check`: loads the manifest and its component as the host would and prints what they
/// declare; exit 0 when both are usable, 2 (with the reason) otherwise.
pub async fn check(args: CheckArgs) -> ExitCode {
    let loaded = load(&args.manifest, args.module_cache).await;
    match loaded {
        Ok(loaded) => {
            print!("{}", check_report(&args.manifest, &loaded));
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(&error),
    }
}

/// `reconcile`: one reconcile of the object in `--object`, against the `--cache` fixtures, with
/// every call recorded; exit 0 when it succeeds, 1 when the guest fails, 2 on bad input.
pub async fn reconcile(args: ReconcileArgs) -> ExitCode {
    let run = match prepare(&args).await {
        Ok(run) => run,
        Err(error) => return bad_input(&error),
    };
    let outcome = run.reconcile(args.requeues).await;
    match args.output {
        Output::Text => print!("{}", outcome.text(&run)),
        Output::Json => match serde_json::to_string_pretty(&outcome) {
            Ok(json) => println!("{json}"),
            Err(error) => return bad_input(&error.into()),
        },
    }
    if outcome.error.is_some() {
        ExitCode::from(EXIT_GUEST_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn bad_input(error: &anyhow::Error) -> ExitCode {
    eprintln!("error: {error:#}");
    ExitCode::from(EXIT_CONFIG)
}

/// A manifest with its compiled, checked component.
struct Loaded {
    manifest: Manifest,
    module: Arc<Module>,
    size: usize,
}

/// Loads the manifest at `path` and its component, as `run` does.
async fn load(path: &Path, module_cache: Option<PathBuf>) -> anyhow::Result<Loaded> {
    let manifest = Manifest::load(path)?;
    let bytes = tokio::fs::read(&manifest.module).await.with_context(|| {
        format!(
            "plugin manifest {}: cannot read its `module` {}; build the component, or fix \
             `module:` (a relative path is resolved against the manifest's directory)",
            path.display(),
            manifest.module.display()
        )
    })?;
    let size = bytes.len();
    let cache = module_cache.or_else(|| HostConfig::default().module_cache_dir());
    let loader = ModuleLoader::new(engine(cache)?);
    let module = loader
        .load_bytes(&manifest.module, bytes)
        .await
        .with_context(|| format!("plugin manifest {}", path.display()))?;
    Ok(Loaded {
        manifest,
        module,
        size,
    })
}

/// An engine for one plugin (no instance pool), caching compiled modules in `cache` if usable.
fn engine(cache: Option<PathBuf>) -> anyhow::Result<PluginEngine> {
    let settings = EngineSettings {
        pooling: false,
        module_cache: cache,
    };
    match PluginEngine::new(settings.clone()) {
        Err(error @ EngineError::Cache(..)) => {
            let error = anyhow::Error::from(error);
            tracing::warn!(
                error = format!("{error:#}"),
                "compiling without a module cache"
            );
            PluginEngine::new(EngineSettings {
                module_cache: None,
                ..settings
            })
        }
        other => other,
    }
    .context("cannot start the WebAssembly engine")
}

/// What `check` prints for a usable plugin.
fn check_report(path: &Path, loaded: &Loaded) -> String {
    let Loaded {
        manifest,
        module,
        size,
    } = loaded;
    let kinds = |kinds: &[KindRef]| match kinds {
        [] => "-".to_owned(),
        kinds => kinds.iter().map(describe).collect::<Vec<_>>().join(", "),
    };
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        let _ = writeln!(out, "{label:<10}{value}");
    };
    line("plugin", &manifest.name);
    line("manifest", &path.display().to_string());
    line("module", &manifest.module.display().to_string());
    line("", &format!("sha256 {}, {}", module.digest(), bytes(*size)));
    line("for", &describe(&manifest.for_kind));
    if let Some(selector) = &manifest.label_selector {
        line("selector", &selector.to_string());
    }
    line(
        "namespace",
        manifest.namespace.as_deref().unwrap_or("* (all)"),
    );
    line("owns", &kinds(&manifest.owns));
    line("cache", &kinds(&manifest.cache));
    let imports: BTreeSet<&str> = module.imports().iter().map(String::as_str).collect();
    for (i, import) in imports.iter().enumerate() {
        line(if i == 0 { "imports" } else { "" }, import);
    }
    if manifest.grants.is_empty() {
        line("grants", "none");
    } else {
        let mut rows = vec![[
            "KIND".to_owned(),
            "VERBS".to_owned(),
            "NAMESPACES".to_owned(),
            "SUBRESOURCES".to_owned(),
        ]];
        rows.extend(manifest.grants.iter().map(grant_row));
        let widths: Vec<usize> = (0..4)
            .map(|c| rows.iter().map(|row| row[c].len()).max().unwrap_or(0))
            .collect();
        for (i, row) in rows.iter().enumerate() {
            let text = format!(
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
            );
            line(if i == 0 { "grants" } else { "" }, &text);
        }
    }
    let client = imports.iter().any(|i| i.starts_with(CLIENT_IMPORT));
    match (client, manifest.grants.is_empty()) {
        (true, true) => out.push_str(
            "warning: the component imports kube:reconcile/client but the manifest grants \
             nothing, so every client call will be denied; add `grants:` for what it writes or \
             reads live\n",
        ),
        (false, false) => out.push_str(
            "warning: the manifest has grants but the component does not import \
             kube:reconcile/client, so they are never used; remove `grants:`\n",
        ),
        _ => {}
    }
    let _ = writeln!(out, "ok: plugin `{}` is valid", manifest.name);
    out
}

fn grant_row(grant: &Grant) -> [String; 4] {
    let verbs: Vec<&str> = grant.verbs.iter().map(|verb| verb.as_str()).collect();
    let subresources = if grant.subresources.is_empty() {
        "-".to_owned()
    } else {
        grant.subresources.join(", ")
    };
    [
        describe(&grant.kind),
        verbs.join(", "),
        grant
            .namespaces
            .as_ref()
            .map_or_else(|| "*".to_owned(), |list| list.join(", ")),
        subresources,
    ]
}

fn describe(kind: &KindRef) -> String {
    format!("{} {}", kind.api_version, kind.kind)
}

fn bytes(size: usize) -> String {
    let kib = size as f64 / 1024.0;
    if kib < 1024.0 {
        format!("{kib:.1} KiB")
    } else {
        format!("{:.1} MiB", kib / 1024.0)
    }
}

/// An object read from a file: its identity and its JSON text.
#[derive(Clone, Debug)]
struct Fixture {
    kind: KindRef,
    namespace: Option<String>,
    name: String,
    json: String,
}

impl Fixture {
    fn key(&self) -> ObjectKey {
        match &self.namespace {
            Some(namespace) => ObjectKey::namespaced(namespace, &self.name),
            None => ObjectKey::cluster(&self.name),
        }
    }

    fn cached(&self) -> anyhow::Result<CachedObject> {
        CachedObject::from_json(&self.json)
            .with_context(|| format!("{} {} has bad metadata", describe(&self.kind), self.key()))
    }
}

/// A reconcile ready to run: the plugin with its fixture caches and recording backend.
struct Run {
    plugin: Plugin,
    object: Fixture,
    backend: Arc<Recorder>,
}

/// Reads the manifest, the component, the object and the fixtures.
async fn prepare(args: &ReconcileArgs) -> anyhow::Result<Run> {
    let Loaded {
        manifest, module, ..
    } = load(&args.manifest, args.module_cache.clone()).await?;
    let object = read_object(&args.object, &manifest)?;
    let mut fixtures = Vec::new();
    for path in &args.cache {
        for file in fixture_files(path)? {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read --cache file {}", file.display()))?;
            let source = file.display().to_string();
            for value in objects_in(&text, &source)? {
                fixtures.push(fixture(value, &source)?);
            }
        }
    }
    let caches = caches(&manifest, &fixtures, &object)?;
    let mut texts: Vec<String> = fixtures.iter().map(|f| f.json.clone()).collect();
    texts.push(object.json.clone());
    let recorder = Recorder::with_objects(&texts)
        .map_err(anyhow::Error::msg)
        .context("cannot index the objects for live reads")?;
    let backend = Arc::new(recorder);
    let api: SharedApi = backend.clone();
    let context = Arc::new(PluginContext::new(Arc::new(manifest), caches, api));
    Ok(Run {
        plugin: Plugin::new(context, module, None),
        object,
        backend,
    })
}

/// The object of `--object`: one object of the manifest's `for` kind.
fn read_object(path: &Path, manifest: &Manifest) -> anyhow::Result<Fixture> {
    let (text, source) = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the object from stdin")?;
        (text, "stdin".to_owned())
    } else {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the object file {}", path.display()))?;
        (text, path.display().to_string())
    };
    let mut values = objects_in(&text, &source)?;
    if values.len() != 1 {
        bail!(
            "{source} holds {} objects; --object takes exactly one (pass others with --cache)",
            values.len()
        );
    }
    let object = fixture(values.remove(0), &source)?;
    if object.kind != manifest.for_kind {
        bail!(
            "{source} is a {}, but plugin `{}` reconciles {} (its `for`); pass an object of \
             that kind with --object",
            describe(&object.kind),
            manifest.name,
            describe(&manifest.for_kind)
        );
    }
    Ok(object)
}

/// The files a `--cache` path names: the file itself, or a directory's `*.yaml`, `*.yml` and
/// `*.json` files, sorted.
fn fixture_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let entries = std::fs::read_dir(path)
        .with_context(|| format!("cannot read --cache directory {}", path.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|file| {
            file.is_file()
                && file
                    .extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The objects in `text` (read from `source`): JSON, or YAML with any number of documents; a
/// `kind: List` stands for its items.
fn objects_in(text: &str, source: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .with_context(|| format!("{source}: document {} is not valid YAML or JSON", i + 1))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                let Some(Value::Array(items)) = map.get("items") else {
                    bail!("{source}: document {} is a List without `items`", i + 1);
                };
                objects.extend(items.iter().cloned());
            }
            value => objects.push(value),
        }
    }
    Ok(objects)
}

/// `value` as a fixture, with the metadata an API server would have set filled in.
fn fixture(mut value: Value, source: &str) -> anyhow::Result<Fixture> {
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let (Some(api_version), Some(kind), Some(name)) = (
        text("/apiVersion"),
        text("/kind"),
        text("/metadata/name").filter(|name| !name.is_empty()),
    ) else {
        bail!(
            "{source}: every object needs `apiVersion`, `kind` and `metadata.name`; one lacks \
             them: {}",
            abbreviate(&value)
        );
    };
    let kind = KindRef::new(api_version, kind);
    let name = name.to_owned();
    let namespace = text("/metadata/namespace").map(str::to_owned);
    complete_metadata(&mut value, &kind, namespace.as_deref(), &name);
    Ok(Fixture {
        kind,
        namespace,
        name,
        json: value.to_string(),
    })
}

/// Fills in what an API server sets on every stored object when a file leaves it out, so guests
/// that read them (owner references need the uid) behave as in a cluster: `metadata.uid`
/// (derived from kind, namespace and name, so runs are repeatable), `metadata.resourceVersion`
/// (`"1"`) and, for objects with a `spec`, `metadata.generation` (1).
fn complete_metadata(value: &mut Value, kind: &KindRef, namespace: Option<&str>, name: &str) {
    let has_spec = value.get("spec").is_some();
    let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let identity = format!(
        "{}/{}/{}/{name}",
        kind.api_version,
        kind.kind,
        namespace.unwrap_or_default()
    );
    metadata
        .entry("uid")
        .or_insert_with(|| json!(uid(&identity)));
    metadata
        .entry("resourceVersion")
        .or_insert_with(|| json!("1"));
    if has_spec {
        metadata.entry("generation").or_insert_with(|| json!(1));
    }
}

/// A UUID-shaped id from the SHA-256 of `identity`.
fn uid(identity: &str) -> String {
    let hex: String = Sha256::digest(identity.as_bytes())
        .iter()
        .take(16)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn abbreviate(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The caches the guest's `cache` import reads, one per kind the manifest lists (as
/// [`cache_scopes`] says), each holding the fixtures of its kind inside its scope; the object
/// is in the `for` kind's cache, as in a host.
fn caches(
    manifest: &Manifest,
    fixtures: &[Fixture],
    object: &Fixture,
) -> anyhow::Result<HashMap<KindRef, Arc<Store>>> {
    let scopes = cache_scopes(manifest);
    let mut caches = HashMap::new();
    for (kind, scope) in &scopes {
        let selector = match &scope.label_selector {
            Some(text) => Some(LabelSelector::parse(text)?),
            None => None,
        };
        let in_scope = |object: &CachedObject| {
            let namespace_ok = match (&scope.namespace, object.namespace()) {
                (Some(wanted), Some(namespace)) => wanted == namespace,
                _ => true,
            };
            namespace_ok && selector.as_ref().is_none_or(|s| s.matches(object.labels()))
        };
        let mut objects = Vec::new();
        for fixture in fixtures.iter().filter(|f| f.kind == *kind) {
            let cached = fixture.cached()?;
            if in_scope(&cached) {
                objects.push(cached);
            } else {
                tracing::warn!(
                    "the fixture {} {} is outside plugin `{}`'s namespace or label selector, \
                     so a host would not cache it; it only answers client.get",
                    describe(kind),
                    fixture.key(),
                    manifest.name
                );
            }
        }
        if *kind == manifest.for_kind {
            let cached = object.cached()?;
            if !in_scope(&cached) {
                tracing::warn!(
                    "the object {} is outside plugin `{}`'s namespace or label selector, so a \
                     host would not reconcile it",
                    object.key(),
                    manifest.name
                );
            }
            objects.push(cached);
        }
        caches.insert(kind.clone(), Arc::new(Store::from_objects(objects)));
    }
    let unread: BTreeSet<String> = fixtures
        .iter()
        .filter(|f| !scopes.iter().any(|(kind, _)| *kind == f.kind))
        .map(|f| describe(&f.kind))
        .collect();
    for kind in unread {
        tracing::warn!(
            "plugin `{}` does not cache {kind} (not its `for`, `owns` or `cache`), so its \
             fixtures only answer client.get",
            manifest.name
        );
    }
    Ok(caches)
}

impl Run {
    /// Calls the guest once, in a `reconcile` span like the host's.
    async fn reconcile(&self, requeues: u32) -> Outcome {
        let object = &self.object;
        let target = ObjectRef {
            kind: Kind {
                api_version: object.kind.api_version.clone(),
                kind: object.kind.kind.clone(),
            },
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        };
        let context = self.plugin.context();
        let span = tracing::info_span!("reconcile", plugin = %context.name, key = %object.key());
        let result = self
            .plugin
            .call(target, Some(object.json.clone()), requeues)
            .instrument(span)
            .await;
        let (action, error) = match result {
            Ok(action) => (Some(ActionRecord::from(action)), None),
            Err(error) => (None, Some(format!("{:#}", anyhow::Error::new(error)))),
        };
        Outcome {
            action,
            error,
            calls: self.backend.calls().iter().map(CallRecord::from).collect(),
            denied: self
                .backend
                .refused_calls()
                .iter()
                .map(|(call, message)| DeniedRecord {
                    call: CallRecord::from(call),
                    message: message.clone(),
                })
                .collect(),
        }
    }
}

/// What `reconcile --output json` prints (the module documentation shows an example).
#[derive(Debug, Serialize)]
pub struct Outcome {
    /// What the guest returned; `None` when it failed.
    pub action: Option<ActionRecord>,
    /// Why the guest failed, with the cause chain; `None` when it succeeded.
    pub error: Option<String>,
    /// The calls the grants allowed, in order (recorded, not applied).
    pub calls: Vec<CallRecord>,
    /// The `client` calls the grants refused, in order.
    pub denied: Vec<DeniedRecord>,
}

/// The action a guest returned: `{"type": "done"}`, `{"type": "requeue"}` or
/// `{"type": "requeue-after", "afterMs": 60000}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ActionRecord {
    /// Nothing until something changes.
    Done,
    /// Again after the key's backoff.
    Requeue,
    /// Again after a delay.
    RequeueAfter {
        /// The delay in milliseconds.
        #[serde(rename = "afterMs")]
        after_ms: u32,
    },
}

impl From<GuestAction> for ActionRecord {
    fn from(action: GuestAction) -> Self {
        match action {
            GuestAction::Done => Self::Done,
            GuestAction::Requeue => Self::Requeue,
            GuestAction::RequeueAfter(after_ms) => Self::RequeueAfter { after_ms },
        }
    }
}

/// One call a guest made. Every field is always present (`null` when it does not apply).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// The `client` function: `apply`, `patch`, `create`, `replace`, `delete` or `get` (an
    /// `events.record-event` is a `create` of an `events.k8s.io/v1` Event).
    pub verb: &'static str,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// Its namespace; `null` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// `status` (or another subresource) for apply and patch calls to one.
    pub subresource: Option<String>,
    /// Whether an `apply` takes over conflicting fields; `null` for other calls.
    pub force: Option<bool>,
    /// The format of a `patch`: `merge`, `json` or `strategic`; `null` for other calls.
    pub patch_type: Option<&'static str>,
    /// The object sent (apply, create, replace) or the patch; `null` for get and delete.
    pub body: Option<Value>,
}

impl From<&ApiCall> for CallRecord {
    fn from(call: &ApiCall) -> Self {
        let target = call.target();
        let mut record = Self {
            verb: "",
            api_version: target.kind.api_version.clone(),
            kind: target.kind.kind.clone(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
            subresource: None,
            force: None,
            patch_type: None,
            body: None,
        };
        match call {
            ApiCall::Apply {
                object,
                force,
                subresource,
                ..
            } => {
                record.verb = "apply";
                record.force = Some(*force);
                record.subresource.clone_from(subresource);
                record.body = Some(object.clone());
            }
            ApiCall::Patch {
                body, subresource, ..
            } => {
                let (patch_type, patch) = match body {
                    PatchDoc::Merge(patch) => ("merge", patch),
                    PatchDoc::Json(patch) => ("json", patch),
                    PatchDoc::Strategic(patch) => ("strategic", patch),
                };
                record.verb = "patch";
                record.patch_type = Some(patch_type);
                record.subresource.clone_from(subresource);
                record.body = Some(patch.clone());
            }
            ApiCall::Create { object, .. } => {
                record.verb = "create";
                record.body = Some(object.clone());
            }
            ApiCall::Replace { object, .. } => {
                record.verb = "replace";
                record.body = Some(object.clone());
            }
            ApiCall::Delete { .. } => record.verb = "delete",
            ApiCall::Get { .. } => record.verb = "get",
        }
        record
    }
}

impl CallRecord {
    /// `apply apps/v1 Deployment default/web (force)`,
    /// `patch v1 ConfigMap default/a (status subresource, merge patch)`.
    fn headline(&self) -> String {
        let key = match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.name),
            None => self.name.clone(),
        };
        let mut text = format!("{} {} {} {key}", self.verb, self.api_version, self.kind);
        let mut notes = Vec::new();
        if let Some(subresource) = &self.subresource {
            notes.push(format!("{subresource} subresource"));
        }
        if let Some(patch_type) = self.patch_type {
            notes.push(format!("{patch_type} patch"));
        }
        if self.force == Some(true) {
            notes.push("force".to_owned());
        }
        if !notes.is_empty() {
            let _ = write!(text, " ({})", notes.join(", "));
        }
        text
    }
}

/// A call the grants refused.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeniedRecord {
    /// The call, as in `calls`.
    #[serde(flatten)]
    pub call: CallRecord,
    /// The `call-error::denied` message the guest got: the missing grant and how to add it.
    pub message: String,
}

impl Outcome {
    /// The human-readable report.
    fn text(&self, run: &Run) -> String {
        let mut out = String::new();
        let context = run.plugin.context();
        let object = &run.object;
        let _ = writeln!(
            out,
            "reconciled {} {} with plugin `{}` (module {:.12})",
            describe(&object.kind),
            object.key(),
            context.name,
            run.plugin.module().digest()
        );
        match (&self.action, &self.error) {
            (Some(action), _) => {
                let action = match action {
                    ActionRecord::Done => "done".to_owned(),
                    ActionRecord::Requeue => "requeue".to_owned(),
                    ActionRecord::RequeueAfter { after_ms } => {
                        format!("requeue-after {after_ms} ms")
                    }
                };
                let _ = writeln!(out, "action: {action}");
            }
            (None, error) => {
                let _ = writeln!(out, "failed: {}", error.as_deref().unwrap_or_default());
            }
        }
        let _ = writeln!(out, "calls: {} (recorded, not applied)", self.calls.len());
        for (i, call) in self.calls.iter().enumerate() {
            let _ = writeln!(out, "  {}. {}", i + 1, call.headline());
            if let Some(body) = &call.body {
                let pretty = serde_json::to_string_pretty(body).unwrap_or_default();
                for line in pretty.lines() {
                    let _ = writeln!(out, "       {line}");
                }
            }
        }
        let _ = writeln!(out, "denied: {}", self.denied.len());
        for (i, denied) in self.denied.iter().enumerate() {
            let _ = writeln!(out, "  {}. {}", i + 1, denied.call.headline());
            let _ = writeln!(out, "       {}", denied.message);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::api::Target;

    const MANIFEST: &str = "name: web\nmodule: web.wasm\nfor: {apiVersion: example.com/v1, \
                            kind: Website}\nowns: [{apiVersion: apps/v1, kind: Deployment}]\n\
                            labelSelector: tier=web\ngrants:\n  - {apiVersion: apps/v1, kind: \
                            Deployment, verbs: [patch], namespaces: [default]}\n";

    fn manifest() -> Manifest {
        Manifest::parse(MANIFEST, Path::new("/plugins")).unwrap()
    }

    fn apply(api_version: &str, kind: &str, namespace: &str) -> ApiCall {
        let object = json!({"apiVersion": api_version, "kind": kind,
                            "metadata": {"name": "x", "namespace": namespace}});
        ApiCall::Apply {
            target: Target {
                kind: KindRef::new(api_version, kind),
                namespace: Some(namespace.to_owned()),
                name: "x".to_owned(),
            },
            object,
            force: true,
            subresource: None,
            field_manager: "web".to_owned(),
        }
    }

    #[test]
    fn documents_lists_and_empty_documents_give_one_value_per_object() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\n\
                    kind: List\napiVersion: v1\nitems:\n  - {apiVersion: v1, kind: Namespace, \
                    metadata: {name: b}}\n  - {apiVersion: v1, kind: Namespace, metadata: {name: c}}\n";
        let names: Vec<Value> = objects_in(text, "f.yaml")
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("a"), json!("b"), json!("c")]);
        let json = r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "j"}}"#;
        assert_eq!(objects_in(json, "f.json").unwrap().len(), 1);
        let error = objects_in("a: [", "bad.yaml").unwrap_err();
        assert!(
            format!("{error:#}").starts_with("bad.yaml: document 1 is not valid"),
            "{error:#}"
        );
    }

    #[test]
    fn fixtures_get_a_repeatable_uid_and_version_but_keep_what_they_set() {
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "namespace": "ns"}});
        let first = fixture(value.clone(), "f").unwrap();
        let second = fixture(value, "f").unwrap();
        assert_eq!(first.json, second.json);
        let parsed: Value = serde_json::from_str(&first.json).unwrap();
        let uid = parsed["metadata"]["uid"].as_str().unwrap();
        assert_eq!(uid.len(), 36, "{uid}");
        assert_eq!(parsed["metadata"]["resourceVersion"], "1");
        assert_eq!(
            parsed["metadata"].get("generation"),
            None,
            "no spec, no generation"
        );
        let set = json!({"apiVersion": "v1", "kind": "X", "spec": {},
                         "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}});
        let parsed: Value = serde_json::from_str(&fixture(set, "f").unwrap().json).unwrap();
        assert_eq!(
            parsed["metadata"],
            json!({"name": "a", "uid": "u", "resourceVersion": "7", "generation": 1})
        );
        let error = fixture(json!({"kind": "X", "metadata": {"name": "a"}}), "f.yaml");
        assert!(
            error
                .unwrap_err()
                .to_string()
                .contains("needs `apiVersion`, `kind` and `metadata.name`")
        );
    }

    #[test]
    fn the_for_cache_holds_the_object_and_selected_fixtures_only() {
        let manifest = manifest();
        let website = |name: &str, tier: &str| {
            fixture(
                json!({"apiVersion": "example.com/v1", "kind": "Website",
                       "metadata": {"name": name, "namespace": "default",
                                    "labels": {"tier": tier}}}),
                "f",
            )
            .unwrap()
        };
        let deployment = fixture(
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "d", "namespace": "default"}}),
            "f",
        )
        .unwrap();
        let fixtures = [website("other", "web"), website("db", "db"), deployment];
        let caches = caches(&manifest, &fixtures, &website("hello", "web")).unwrap();
        let mut names: Vec<String> = caches[&manifest.for_kind]
            .list()
            .iter()
            .map(|o| o.name().to_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["hello", "other"]);
        assert_eq!(caches[&KindRef::new("apps/v1", "Deployment")].len(), 1);
    }

    #[test]
    fn calls_read_as_verb_kind_key_and_options() {
        let record = CallRecord::from(&apply("apps/v1", "Deployment", "default"));
        assert_eq!(
            record.headline(),
            "apply apps/v1 Deployment default/x (force)"
        );
        let json = serde_json::to_value(&record).unwrap();
        let mut fields: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort_unstable();
        let stable = [
            "apiVersion",
            "body",
            "force",
            "kind",
            "name",
            "namespace",
            "patchType",
            "subresource",
            "verb",
        ];
        assert_eq!(fields, stable);
        assert_eq!(
            serde_json::to_value(ActionRecord::RequeueAfter { after_ms: 60_000 }).unwrap(),
            json!({"type": "requeue-after", "afterMs": 60000})
        );
    }
}
