//! The host's configuration file (YAML), its defaults and its validation.
//!
//! ```yaml
//! kubeconfig: /etc/reconcile-host/kubeconfig   # default: $KUBECONFIG, ~/.kube/config, in-cluster
//! context: dev                                # default: the kubeconfig's current context
//! serviceAccountDir: /var/run/secrets/kubernetes.io/serviceaccount  # in-cluster token and CA
//! leaderElection:
//!   enabled: true
//!   leaseName: reconcile-host
//!   leaseNamespace: default                   # default: the host's namespace (see below)
//!   leaseDuration: 15s
//!   renewDeadline: 10s
//!   retryPeriod: 2s
//!   exitOnLoss: false
//! telemetry:
//!   address: 0.0.0.0:8080
//!   authorization: auto                       # kubernetes (in a cluster: TLS, TokenReview and
//!                                             # SubjectAccessReview for /metrics, /debug/*) or none
//!   tls: {certFile: /tls/tls.crt, keyFile: /tls/tls.key}   # default: self-signed at start
//! client:                                     # the host's own requests (informers)
//!   qps: 5
//!   burst: 10
//! pluginClient:                               # each plugin's own budget (apiRateLimit)
//!   qps: 5                                    # default for plugins that set none
//!   burst: 10
//!   maxQps: 100                               # ceiling for plugins that set one
//!   maxBurst: 200
//! shutdown:
//!   drainTimeout: 30s
//! plugins:                                    # manifests, or directories of <name>/plugin.yaml
//!   - /etc/reconcile-host/plugins
//! pluginObjects: true                         # also ReconcilerPlugin objects; default: false
//! moduleCache: /var/cache/reconcile-host      # default: $XDG_CACHE_HOME or ~/.cache
//! recording:                                  # recorded reconciles, for `reconcile-host replay`
//!   keep: 16                                  # per plugin, in memory (GET /debug/recordings/<plugin>); 0: off
//!   directory: /var/lib/reconcile-host/recordings   # also one file a bundle; default: none
//!   keepSecrets: false                        # default: Secret values replaced by `redacted`
//!   serve: false                              # serve bundles, take POSTs to record (no auth on the port)
//! pluginIdentity:                             # the ServiceAccount each plugin acts as
//!   defaultServiceAccount: plugins/default    # for plugins naming none; default: none
//!   requireServiceAccount: true               # refuse plugins that would act as the host
//! tenants:                                    # ceilings shared by one namespace's plugins
//!   default: {apiQps: 100, apiBurst: 200, instances: 16, memory: 1Gi}
//!   namespaces:
//!     team-a: {instances: 2, memory: 256Mi}   # fields left out come from `default`
//! oci:                                        # plugin modules from OCI registries
//!   insecureRegistries: [localhost:5000]      # reached over plain HTTP; others HTTPS only
//!   caFiles: [/etc/reconcile-host/registry-ca.pem]
//!   dockerConfig: /etc/reconcile-host/docker/config.json   # credentials (`auths`)
//!   cacheDir: /var/cache/reconcile-host/oci   # default: `oci` beside the module cache
//! ```

pub mod duration;
mod identity;
mod oci;
mod quantity;
mod recording;
mod telemetry;
mod tenants;

pub use identity::{PluginIdentityConfig, ServiceAccountRef};
pub use oci::OciSettings;
pub use quantity::quantity;
pub use recording::RecordingConfig;
pub use telemetry::{TelemetryAuthorization, TelemetryConfig, TelemetryTls};
pub use tenants::{CeilingsSettings, TenantCeilings, TenantsConfig};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Everything `reconcile-host run` reads from its configuration file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HostConfig {
    /// Path of the kubeconfig; `None`: `$KUBECONFIG`, `~/.kube/config`, then the in-cluster
    /// service account (see [`crate::cluster_config`]).
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context; `None` for the current context.
    pub context: Option<String>,
    /// Where the in-cluster service account's `token`, `ca.crt` and `namespace` are; `None`
    /// for [`DEFAULT_SERVICE_ACCOUNT_DIR`](crate::cluster_config::DEFAULT_SERVICE_ACCOUNT_DIR).
    /// Used only when no kubeconfig is found.
    pub service_account_dir: Option<PathBuf>,
    /// Leader election.
    pub leader_election: LeaderElectionConfig,
    /// Metrics and health endpoints.
    pub telemetry: TelemetryConfig,
    /// Client-side limits for the host's own API calls.
    pub client: ClientConfig,
    /// Each plugin's API budget: the default, and the ceiling a manifest may ask for.
    pub plugin_client: PluginClientConfig,
    /// Graceful shutdown.
    pub shutdown: ShutdownConfig,
    /// Plugin manifests loaded at start: manifest files, or directories whose
    /// `<name>/plugin.yaml` files are manifests. Relative paths are taken from the working
    /// directory.
    pub plugins: Vec<PathBuf>,
    /// Also load plugins declared as `ReconcilerPlugin` objects (cluster-scoped, group
    /// `reconcile-host.dev`), written as plugin files under the temporary directory.
    pub plugin_objects: bool,
    /// Where compiled plugin modules are kept between runs; `None`: `$XDG_CACHE_HOME` or
    /// `~/.cache`, under `reconcile-host/modules` (no cache if neither is known).
    pub module_cache: Option<PathBuf>,
    /// Plugin modules in memory.
    pub modules: ModulesConfig,
    /// OCI registries: insecure hosts, extra CAs, credentials, the pulled-module cache.
    pub oci: OciSettings,
    /// Recorded reconciles: failures and keys asked for.
    pub recording: RecordingConfig,
    /// Which ServiceAccount each plugin acts as.
    pub plugin_identity: PluginIdentityConfig,
    /// Ceilings shared by the plugins of one tenant (the namespace of the ServiceAccount they
    /// act as).
    pub tenants: TenantsConfig,
}

/// What [`HostConfig::plugin_objects_dir`] names a process's directory: this, then its pid.
const PLUGIN_OBJECTS_PREFIX: &str = "reconcile-host-plugin-objects-";

/// Removes the plugin-objects directories under `parent` that this user's host processes left
/// when they were killed before they could remove them.
pub fn remove_abandoned_plugin_objects_dirs(parent: &Path) {
    crate::leftovers::remove(
        parent,
        PLUGIN_OBJECTS_PREFIX,
        crate::leftovers::Kind::Dir,
        "the plugin-objects directory",
    );
}

impl HostConfig {
    /// Where this process writes the plugins of `ReconcilerPlugin` objects: a directory of its
    /// own under the temporary directory (`$TMPDIR`, else `/tmp`).
    #[must_use]
    pub fn plugin_objects_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("{PLUGIN_OBJECTS_PREFIX}{}", std::process::id()))
    }

    /// The compiled-module cache directory in effect (see `module_cache`).
    #[must_use]
    pub fn module_cache_dir(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.module_cache {
            return Some(dir.clone());
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
        Some(base.join("reconcile-host").join("modules"))
    }
}

/// `leaderElection:` settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LeaderElectionConfig {
    /// Whether replicas coordinate through Leases (off: this replica always dispatches).
    pub enabled: bool,
    /// How they share the work: one leader, or sharded over every live replica.
    pub mode: ElectionMode,
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's namespace; `None` for the host's own namespace: in a pod the service
    /// account's `namespace` file, with a kubeconfig its context's namespace (else `default`).
    pub lease_namespace: Option<String>,
    /// How long followers wait before taking over.
    #[serde(with = "duration")]
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up.
    #[serde(with = "duration")]
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    #[serde(with = "duration")]
    pub retry_period: Duration,
    /// Exit (instead of campaigning again) after losing leadership.
    pub exit_on_loss: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            mode: ElectionMode::Leader,
            lease_name: "reconcile-host".to_owned(),
            lease_namespace: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            exit_on_loss: false,
        }
    }
}

/// `leaderElection.mode`: how replicas share the work.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "camelCase")]
pub enum ElectionMode {
    /// One replica (the holder of the Lease `leaseName`) dispatches every key; the others wait
    /// warm.
    #[default]
    Leader,
    /// Every replica holds a Lease `<leaseName>-<identity>` and dispatches its share of the
    /// keys (docs/sharding.md).
    Sharded,
}

/// `client:` settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Sustained requests per second to the API server.
    pub qps: f64,
    /// Requests allowed at once above the sustained rate.
    pub burst: u32,
}

impl Default for ClientConfig {
    /// client-go's defaults: 5 qps, burst 10.
    fn default() -> Self {
        Self {
            qps: 5.0,
            burst: 10,
        }
    }
}

/// `pluginClient:` settings: every plugin has a client and token bucket of its own.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PluginClientConfig {
    /// Requests per second of a plugin whose manifest sets no `apiRateLimit`.
    pub qps: f64,
    /// Its burst.
    pub burst: u32,
    /// The most requests per second a manifest may ask for (at least `qps`).
    pub max_qps: f64,
    /// The largest burst a manifest may ask for.
    pub max_burst: u32,
}

impl Default for PluginClientConfig {
    /// client-go's defaults per plugin (5 qps, burst 10), at most 100 qps and burst 200.
    fn default() -> Self {
        Self {
            qps: 5.0,
            burst: 10,
            max_qps: 100.0,
            max_burst: 200,
        }
    }
}

/// `modules:` settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModulesConfig {
    /// How long a plugin module may go without a call before its compiled code is unmapped
    /// (its next call maps it again from the module cache: about a millisecond for a
    /// JavaScript module, 17 for a Python one); zero keeps every module loaded. Without a
    /// module cache, modules stay loaded.
    #[serde(with = "duration")]
    pub unload_idle_after: Duration,
}

impl Default for ModulesConfig {
    fn default() -> Self {
        Self {
            unload_idle_after: Duration::from_secs(60),
        }
    }
}

/// `shutdown:` settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// How long reconciles in progress may finish after a shutdown signal.
    #[serde(with = "duration")]
    pub drain_timeout: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// A configuration that cannot be used; the message names the field and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML for this schema.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// serde's message, naming the field and line.
        message: String,
    },
    /// A value is out of range.
    #[error("config `{field}`: {problem}")]
    Invalid {
        /// The field, as written in the file (`leaderElection.renewDeadline`).
        field: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

impl HostConfig {
    /// Reads and parses `path`.
    ///
    /// # Errors
    /// When the file cannot be read or does not match the schema.
    pub fn load(path: &Path) -> Result<Self, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|message| ConfigFileError::Parse {
            path: path.to_owned(),
            message,
        })
    }

    /// Parses YAML text; the error names the offending field.
    ///
    /// # Errors
    /// serde's message when the text does not match the schema.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())
    }

    /// Checks values that parse but cannot work.
    ///
    /// # Errors
    /// The first invalid field.
    pub fn validate(&self) -> Result<(), ConfigFileError> {
        let le = &self.leader_election;
        let invalid = |field: &str, problem: String| {
            Err(ConfigFileError::Invalid {
                field: field.to_owned(),
                problem,
            })
        };
        if le.enabled {
            if le.lease_name.is_empty() {
                return invalid("leaderElection.leaseName", "must not be empty".into());
            }
            // Sharded mode: the name is the ring's label value and its Leases' name prefix.
            if le.mode == ElectionMode::Sharded && !label_selector::is_dns_label(&le.lease_name) {
                return invalid(
                    "leaderElection.leaseName",
                    format!(
                        "`{}` cannot name a ring in sharded mode (it labels the replicas' \
                         Leases); use at most 63 lowercase letters, digits and `-`",
                        le.lease_name
                    ),
                );
            }
            if let Some(namespace) = &le.lease_namespace
                && !label_selector::is_dns_label(namespace)
            {
                return invalid(
                    "leaderElection.leaseNamespace",
                    format!(
                        "`{namespace}` is not a namespace name; use lowercase letters, digits \
                         and `-`, or leave it out for the host's own namespace"
                    ),
                );
            }
            for (field, value) in [
                ("leaderElection.leaseDuration", le.lease_duration),
                ("leaderElection.renewDeadline", le.renew_deadline),
                ("leaderElection.retryPeriod", le.retry_period),
            ] {
                if value.is_zero() {
                    return invalid(field, "must be greater than zero".into());
                }
            }
            if le.lease_duration <= le.renew_deadline {
                return invalid(
                    "leaderElection.leaseDuration",
                    format!(
                        "must be greater than renewDeadline ({:?}), or two leaders could overlap",
                        le.renew_deadline
                    ),
                );
            }
            let jittered = le.retry_period.mul_f64(crate::election::JITTER_FACTOR);
            if le.renew_deadline <= jittered {
                return invalid(
                    "leaderElection.renewDeadline",
                    format!(
                        "must be greater than 1.2 × retryPeriod ({jittered:?}); lower retryPeriod"
                    ),
                );
            }
        }
        if !(self.client.qps.is_finite() && self.client.qps > 0.0) {
            return invalid(
                "client.qps",
                format!("must be a positive number, got {}", self.client.qps),
            );
        }
        if self.client.burst == 0 {
            return invalid("client.burst", "must be at least 1".into());
        }
        let plugins = &self.plugin_client;
        for (field, qps) in [
            ("pluginClient.qps", plugins.qps),
            ("pluginClient.maxQps", plugins.max_qps),
        ] {
            if !(qps.is_finite() && qps > 0.0) {
                return invalid(field, format!("must be a positive number, got {qps}"));
            }
        }
        if plugins.burst == 0 || plugins.max_burst == 0 {
            return invalid(
                "pluginClient.burst",
                "burst and maxBurst must be at least 1".into(),
            );
        }
        let tls = &self.telemetry.tls;
        if tls.cert_file.is_some() != tls.key_file.is_some() {
            return invalid(
                "telemetry.tls",
                "give both certFile and keyFile, or neither (a self-signed certificate)".into(),
            );
        }
        self.tenants
            .validate()
            .map_err(|(field, problem)| ConfigFileError::Invalid { field, problem })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abandoned_plugin_objects_directories_are_removed_and_live_ones_kept() {
        let parent = tempfile::tempdir().expect("temporary directory");
        // A pid above any kernel's pid_max never runs.
        let gone = parent
            .path()
            .join(format!("{PLUGIN_OBJECTS_PREFIX}4294967290"));
        let mine = parent
            .path()
            .join(format!("{PLUGIN_OBJECTS_PREFIX}{}", std::process::id()));
        for dir in [&gone, &mine] {
            std::fs::create_dir(dir).expect("a directory");
        }
        remove_abandoned_plugin_objects_dirs(parent.path());
        assert!(!gone.exists());
        assert!(mine.exists());
    }

    #[test]
    fn an_empty_file_means_every_default() {
        let config = HostConfig::parse("").unwrap();
        assert_eq!(config, HostConfig::default());
        assert!(config.leader_election.enabled);
        assert_eq!(
            config.leader_election.lease_namespace, None,
            "the Lease goes to the host's own namespace"
        );
        assert_eq!(
            config.leader_election.lease_duration,
            Duration::from_secs(15)
        );
        assert_eq!((config.client.qps, config.client.burst), (5.0, 10));
        assert_eq!(config.leader_election.mode, ElectionMode::Leader);
        config.validate().unwrap();
    }

    #[test]
    fn sharded_mode_is_chosen_by_name_and_a_typo_names_the_choices() {
        let config = HostConfig::parse("leaderElection: {mode: sharded}").unwrap();
        assert_eq!(config.leader_election.mode, ElectionMode::Sharded);
        config.validate().unwrap();
        let upper = HostConfig::parse("leaderElection: {mode: sharded, leaseName: Ring}").unwrap();
        let error = upper.validate().unwrap_err().to_string();
        assert!(
            error.contains("leaderElection.leaseName") && error.contains("63"),
            "{error}"
        );
        let error = HostConfig::parse("leaderElection: {mode: shards}").unwrap_err();
        assert!(
            error.contains("leader") && error.contains("sharded"),
            "{error}"
        );
    }

    #[test]
    fn a_full_file_parses_with_go_style_durations() {
        let config = HostConfig::parse(
            "kubeconfig: /tmp/kc\ncontext: dev\nserviceAccountDir: /tmp/sa\n\
             leaderElection:\n  leaseName: x\n  leaseNamespace: ops\n  \
             leaseDuration: 1m30s\n  renewDeadline: 20s\n  retryPeriod: 500ms\n\
             telemetry:\n  address: 127.0.0.1:9000\nclient:\n  qps: 20\n  burst: 40\n\
             shutdown:\n  drainTimeout: 2m\n",
        )
        .unwrap();
        assert_eq!(config.kubeconfig.as_deref(), Some(Path::new("/tmp/kc")));
        assert_eq!(
            config.service_account_dir.as_deref(),
            Some(Path::new("/tmp/sa"))
        );
        assert_eq!(
            config.leader_election.lease_namespace.as_deref(),
            Some("ops")
        );
        assert_eq!(
            config.leader_election.lease_duration,
            Duration::from_secs(90)
        );
        assert_eq!(
            config.leader_election.retry_period,
            Duration::from_millis(500)
        );
        assert_eq!(config.telemetry.address.port(), 9000);
        assert_eq!(config.shutdown.drain_timeout, Duration::from_secs(120));
        config.validate().unwrap();
    }

    #[test]
    fn unknown_fields_and_bad_durations_are_errors_naming_them() {
        let error = HostConfig::parse("leaderElection:\n  leaseDurration: 15s\n").unwrap_err();
        assert!(error.contains("leaseDurration"), "{error}");
        let error = HostConfig::parse("shutdown:\n  drainTimeout: soon\n").unwrap_err();
        assert!(error.contains("`soon` is not a duration"), "{error}");
    }

    #[test]
    fn values_that_cannot_work_are_refused_with_the_field_name() {
        let mut config = HostConfig::default();
        config.leader_election.renew_deadline = Duration::from_secs(20);
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.starts_with("config `leaderElection.leaseDuration`"),
            "{error}"
        );
        let mut config = HostConfig::default();
        config.client.qps = 0.0;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("config `client.qps`"), "{error}");
        let mut config = HostConfig::default();
        config.leader_election.enabled = false;
        config.leader_election.renew_deadline = Duration::from_secs(99);
        config
            .validate()
            .expect("election settings are ignored when it is off");
    }

    #[test]
    fn durations_parse_like_go() {
        for (text, want) in [
            ("15s", Duration::from_secs(15)),
            ("1m30s", Duration::from_secs(90)),
            ("250ms", Duration::from_millis(250)),
            ("1.5h", Duration::from_secs(5400)),
        ] {
            assert_eq!(duration::parse(text), Ok(want), "{text}");
        }
        for bad in ["", "15", "s", "1x", "-1s"] {
            assert!(duration::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
