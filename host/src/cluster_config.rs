//! Where the host finds its API server: a kubeconfig, or, inside a pod, the mounted service
//! account (token, CA, namespace) with `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`.
//!
//! # Flow
//! The first source that is present is used; later ones are not tried:
//! 1. `--kubeconfig` (or `kubeconfig:` in the config file), with `--context` if given;
//! 2. `$KUBECONFIG` when set, else `~/.kube/config` when the file exists (as kube-rs and kubectl
//!    read them, `--context` if given);
//! 3. in-cluster, when `KUBERNETES_SERVICE_HOST` is set: `https://$KUBERNETES_SERVICE_HOST:
//!    $KUBERNETES_SERVICE_PORT`, trusting `ca.crt` and sending `token` from the service account
//!    directory (`--service-account-dir`, default [`DEFAULT_SERVICE_ACCOUNT_DIR`]).
//!
//! # Guarantees
//! - In-cluster, the token file is re-read by kube-rs (about once a minute), so projected
//!   tokens that the kubelet rotates keep working; `ca.crt` is re-read the same way.
//! - [`ClusterConfig::namespace`] is the service account's `namespace` file in-cluster, or the
//!   kubeconfig context's namespace (`default` when it has none): the host's Lease goes there
//!   unless `--lease-namespace` says otherwise.
//!
//! # Errors
//! Unlike kube-rs's `Config::infer`, a kubeconfig that exists but cannot be used is an error
//! naming it, not a silent fall-back to in-cluster: a typo in `$KUBECONFIG` should not quietly
//! point the host at another cluster. Every [`ClusterConfigError`] names the file or variable
//! and the fix.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Where Kubernetes mounts a pod's service account: `token`, `ca.crt` and `namespace`.
pub const DEFAULT_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The variable naming the API server's host inside a pod.
const SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
/// The variable naming the API server's port inside a pod.
const SERVICE_PORT: &str = "KUBERNETES_SERVICE_PORT";

/// What to connect with, as the host's flags and config file give it.
#[derive(Clone, Debug, Default)]
pub struct ClusterSource {
    /// An explicit kubeconfig file (`--kubeconfig`); wins over everything else.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (`--context`); `None` for the current context.
    pub context: Option<String>,
    /// The service account directory for the in-cluster case; `None` for
    /// [`DEFAULT_SERVICE_ACCOUNT_DIR`].
    pub service_account_dir: Option<PathBuf>,
}

/// Where the configuration came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A kubeconfig: the file, or `$KUBECONFIG` as set.
    Kubeconfig(String),
    /// The service account in this directory.
    InCluster(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kubeconfig(what) => write!(f, "kubeconfig {what}"),
            Self::InCluster(dir) => write!(f, "in-cluster service account {}", dir.display()),
        }
    }
}

/// A usable client configuration and what the host learns with it.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The kube-rs configuration.
    pub config: kube::Config,
    /// Where it came from.
    pub origin: Origin,
    /// The namespace the host runs in; `None` in-cluster when the `namespace` file is missing.
    pub namespace: Option<String>,
}

impl ClusterConfig {
    /// The namespace for the host's own objects (its Lease) when none is configured.
    ///
    /// # Errors
    /// [`ClusterConfigError::NoNamespace`] in-cluster when the `namespace` file was missing.
    pub fn namespace(&self) -> Result<&str, ClusterConfigError> {
        match (&self.namespace, &self.origin) {
            (Some(namespace), _) => Ok(namespace),
            (None, Origin::InCluster(dir)) => Err(ClusterConfigError::NoNamespace {
                path: dir.join("namespace"),
            }),
            (None, Origin::Kubeconfig(_)) => Ok("default"),
        }
    }
}

/// Why no API server configuration could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClusterConfigError {
    /// An explicit or found kubeconfig cannot be read or used.
    #[error("kubeconfig {what} is not usable; fix it, or pass --kubeconfig with a working one")]
    Kubeconfig {
        /// The file, or `$KUBECONFIG=…`.
        what: String,
        /// kube-rs's reason.
        #[source]
        source: KubeconfigError,
    },
    /// No kubeconfig and not in a pod.
    #[error(
        "no API server to connect to: no --kubeconfig, $KUBECONFIG is unset, {home_config} does \
         not exist, and {SERVICE_HOST} is unset (not in a pod); pass --kubeconfig or set \
         KUBECONFIG, or run the host in a pod"
    )]
    NotFound {
        /// Where `~/.kube/config` was looked for.
        home_config: String,
    },
    /// `--context` without any kubeconfig.
    #[error(
        "--context `{context}` needs a kubeconfig, but there is none; pass --kubeconfig or set \
         KUBECONFIG, or drop --context to use the in-cluster service account"
    )]
    ContextWithoutKubeconfig {
        /// The context asked for.
        context: String,
    },
    /// An in-cluster variable is missing or malformed.
    #[error(
        "in-cluster configuration: {variable} is {problem}; a pod gets {SERVICE_HOST} and \
         {SERVICE_PORT} from the kubelet, set both when running elsewhere"
    )]
    ServiceVariable {
        /// The variable.
        variable: &'static str,
        /// `unset`, or the bad value quoted.
        problem: String,
    },
    /// A service account file cannot be read or holds nothing usable.
    #[error(
        "in-cluster configuration: cannot use the service account {what} {path}: {problem}; \
         mount the service account into the pod (automountServiceAccountToken), or point \
         --service-account-dir (RECONCILE_HOST_SERVICE_ACCOUNT_DIR) at a directory holding \
         `token`, `ca.crt` and `namespace`"
    )]
    ServiceAccountFile {
        /// `token` or `CA certificate`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error or what is wrong with the content.
        problem: String,
    },
    /// In-cluster, the Lease's namespace was needed but the `namespace` file is missing.
    #[error(
        "cannot read {path}, the host's namespace, to place its Lease; pass --lease-namespace, \
         or mount the service account's `namespace` file there"
    )]
    NoNamespace {
        /// The missing file.
        path: PathBuf,
    },
}

/// The configuration for `source`, looking at the process's environment.
///
/// # Errors
/// [`ClusterConfigError`], naming the file or variable at fault and the fix.
pub async fn cluster_config(source: &ClusterSource) -> Result<ClusterConfig, ClusterConfigError> {
    resolve(source, &|name| std::env::var(name).ok()).await
}

/// [`cluster_config`] with `env` for the variables (`KUBECONFIG`, `HOME`, `KUBERNETES_SERVICE_*`).
async fn resolve(
    source: &ClusterSource,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<ClusterConfig, ClusterConfigError> {
    let options = KubeConfigOptions {
        context: source.context.clone(),
        ..KubeConfigOptions::default()
    };
    if let Some(path) = &source.kubeconfig {
        let what = path.display().to_string();
        let unusable = |source| ClusterConfigError::Kubeconfig {
            what: what.clone(),
            source,
        };
        let kubeconfig = Kubeconfig::read_from(path).map_err(unusable)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(unusable)?;
        return Ok(from_kubeconfig(config, what));
    }
    let from_env = env("KUBECONFIG").filter(|value| !value.is_empty());
    let home_config = env("HOME").map(|home| Path::new(&home).join(".kube").join("config"));
    let found = match (from_env, &home_config) {
        (Some(value), _) => Some((format!("$KUBECONFIG={value}"), merged(&value))),
        (None, Some(path)) if path.is_file() => {
            Some((path.display().to_string(), Kubeconfig::read_from(path)))
        }
        _ => None,
    };
    if let Some((what, read)) = found {
        let unusable = |source| ClusterConfigError::Kubeconfig {
            what: what.clone(),
            source,
        };
        let kubeconfig = read.map_err(unusable)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(unusable)?;
        return Ok(from_kubeconfig(config, what));
    }
    if let Some(context) = &source.context {
        return Err(ClusterConfigError::ContextWithoutKubeconfig {
            context: context.clone(),
        });
    }
    if env(SERVICE_HOST).is_none() {
        return Err(ClusterConfigError::NotFound {
            home_config: home_config.map_or_else(
                || "~/.kube/config ($HOME unset)".to_owned(),
                |path| path.display().to_string(),
            ),
        });
    }
    let dir = source
        .service_account_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SERVICE_ACCOUNT_DIR));
    in_cluster(&dir, env)
}

/// The files of a `KUBECONFIG` value merged, as kubectl merges them.
fn merged(value: &str) -> Result<Kubeconfig, KubeconfigError> {
    std::env::split_paths(value)
        .filter(|path| !path.as_os_str().is_empty())
        .try_fold(Kubeconfig::default(), |merged, path| {
            Kubeconfig::read_from(path).and_then(|next| merged.merge(next))
        })
}

fn from_kubeconfig(mut config: kube::Config, what: String) -> ClusterConfig {
    config.apply_debug_overrides();
    ClusterConfig {
        namespace: Some(config.default_namespace.clone()),
        config,
        origin: Origin::Kubeconfig(what),
    }
}

/// The in-cluster configuration from the service account in `dir` and the service variables.
///
/// # Errors
/// When a variable is missing or malformed, or `token` or `ca.crt` cannot be read.
fn in_cluster(
    dir: &Path,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<ClusterConfig, ClusterConfigError> {
    let variable = |name: &'static str| {
        env(name).filter(|value| !value.is_empty()).ok_or_else(|| {
            ClusterConfigError::ServiceVariable {
                variable: name,
                problem: "unset".to_owned(),
            }
        })
    };
    let host = variable(SERVICE_HOST)?;
    let port_text = variable(SERVICE_PORT)?;
    let port: u16 = port_text
        .parse()
        .map_err(|_| ClusterConfigError::ServiceVariable {
            variable: SERVICE_PORT,
            problem: format!("`{port_text}`, not a port number"),
        })?;
    let cluster_url =
        service_url(&host, port).map_err(|problem| ClusterConfigError::ServiceVariable {
            variable: SERVICE_HOST,
            problem,
        })?;
    let token = dir.join("token");
    let file_problem =
        |what, path: &Path, problem: String| ClusterConfigError::ServiceAccountFile {
            what,
            path: path.to_owned(),
            problem,
        };
    match std::fs::read_to_string(&token) {
        Ok(text) if text.trim().is_empty() => {
            return Err(file_problem("token", &token, "the file is empty".into()));
        }
        Ok(_) => {}
        Err(error) => return Err(file_problem("token", &token, error.to_string())),
    }
    let ca = dir.join("ca.crt");
    let pem = std::fs::read(&ca)
        .map_err(|error| file_problem("CA certificate", &ca, error.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|cert| cert.map(|der| der.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| {
            file_problem(
                "CA certificate",
                &ca,
                format!("not PEM certificates ({error})"),
            )
        })?;
    if certs.is_empty() {
        return Err(file_problem(
            "CA certificate",
            &ca,
            "holds no PEM certificate".into(),
        ));
    }
    let namespace = std::fs::read_to_string(dir.join("namespace"))
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|namespace| !namespace.is_empty());
    let mut config = kube::Config::new(cluster_url);
    if let Some(namespace) = &namespace {
        config.default_namespace.clone_from(namespace);
    }
    config.root_cert = Some(certs);
    config.root_cert_file = Some(ca);
    config.auth_info.token_file = Some(token.display().to_string());
    config.apply_debug_overrides();
    Ok(ClusterConfig {
        config,
        origin: Origin::InCluster(dir.to_owned()),
        namespace,
    })
}

/// `https://host[:port]`, bracketing IPv6 addresses and leaving out port 443, as client-go does.
fn service_url(host: &str, port: u16) -> Result<http::Uri, String> {
    let authority = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => host.to_owned(),
    };
    let url = if port == 443 {
        format!("https://{authority}")
    } else {
        format!("https://{authority}:{port}")
    };
    url.parse()
        .map_err(|_| format!("`{host}`, which does not make a URL ({url})"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A scratch directory, removed when the returned value is dropped.
    fn scratch(test: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("reconcile-host-cluster-config-{test}-"))
            .tempdir()
            .unwrap()
    }

    const CA: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIUJ3Q4\n-----END CERTIFICATE-----\n";

    fn service_account(dir: &Path, namespace: Option<&str>) {
        std::fs::write(dir.join("token"), "secret-token\n").unwrap();
        std::fs::write(dir.join("ca.crt"), CA).unwrap();
        if let Some(namespace) = namespace {
            std::fs::write(dir.join("namespace"), namespace).unwrap();
        }
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + Sync + use<> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn source(dir: &Path) -> ClusterSource {
        ClusterSource {
            service_account_dir: Some(dir.to_owned()),
            ..ClusterSource::default()
        }
    }

    #[tokio::test]
    async fn in_a_pod_the_service_account_directory_and_service_variables_are_used() {
        let tmp = scratch("pod");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, Some("reconcile-system\n"));
        let home = dir.join("home");
        let home = home.display().to_string();
        let vars = env(&[
            ("HOME", &home),
            (SERVICE_HOST, "10.0.0.1"),
            (SERVICE_PORT, "6443"),
        ]);
        let found = resolve(&source(&dir), &vars).await.unwrap();
        assert_eq!(found.origin, Origin::InCluster(dir.clone()));
        assert_eq!(found.config.cluster_url, "https://10.0.0.1:6443/");
        assert_eq!(found.namespace().unwrap(), "reconcile-system");
        assert_eq!(
            found.config.auth_info.token_file.as_deref(),
            Some(dir.join("token").to_str().unwrap()),
            "the token is read from its file, so rotation is picked up"
        );
        assert_eq!(found.config.root_cert_file, Some(dir.join("ca.crt")));
        assert_eq!(found.config.root_cert.map(|c| c.len()), Some(1));
    }

    #[tokio::test]
    async fn a_missing_token_is_an_error_naming_the_file_and_the_fix() {
        let tmp = scratch("no-token");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, Some("default"));
        std::fs::remove_file(dir.join("token")).unwrap();
        let vars = env(&[(SERVICE_HOST, "10.0.0.1"), (SERVICE_PORT, "443")]);
        let error = resolve(&source(&dir), &vars).await.unwrap_err().to_string();
        assert!(
            error.contains(&format!("token {}", dir.join("token").display())),
            "{error}"
        );
        assert!(error.contains("No such file"), "{error}");
        assert!(error.contains("--service-account-dir"), "{error}");
    }

    #[tokio::test]
    async fn a_ca_file_without_certificates_is_refused() {
        let tmp = scratch("bad-ca");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, None);
        std::fs::write(dir.join("ca.crt"), "not a certificate\n").unwrap();
        let vars = env(&[(SERVICE_HOST, "10.0.0.1"), (SERVICE_PORT, "443")]);
        let error = resolve(&source(&dir), &vars).await.unwrap_err().to_string();
        assert!(
            error.contains("ca.crt: holds no PEM certificate"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn without_a_namespace_file_the_lease_namespace_must_be_given() {
        let tmp = scratch("no-namespace");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, None);
        let vars = env(&[(SERVICE_HOST, "10.0.0.1"), (SERVICE_PORT, "443")]);
        let found = resolve(&source(&dir), &vars).await.unwrap();
        let error = found.namespace().unwrap_err().to_string();
        assert!(error.contains("namespace"), "{error}");
        assert!(error.contains("--lease-namespace"), "{error}");
    }

    #[tokio::test]
    async fn bad_service_variables_are_named() {
        let tmp = scratch("bad-port");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, None);
        let vars = env(&[(SERVICE_HOST, "10.0.0.1"), (SERVICE_PORT, "https")]);
        let error = resolve(&source(&dir), &vars).await.unwrap_err().to_string();
        assert!(
            error.contains("KUBERNETES_SERVICE_PORT is `https`, not a port"),
            "{error}"
        );
        let vars = env(&[(SERVICE_HOST, "10.0.0.1")]);
        let error = resolve(&source(&dir), &vars).await.unwrap_err().to_string();
        assert!(
            error.contains("KUBERNETES_SERVICE_PORT is unset"),
            "{error}"
        );
    }

    #[test]
    fn service_urls_follow_client_go() {
        assert_eq!(service_url("10.0.0.1", 443).unwrap(), "https://10.0.0.1/");
        assert_eq!(
            service_url("fd00::1", 6443).unwrap(),
            "https://[fd00::1]:6443/"
        );
        assert_eq!(
            service_url("kubernetes.default.svc", 8443).unwrap(),
            "https://kubernetes.default.svc:8443/"
        );
    }

    #[tokio::test]
    async fn nothing_to_connect_to_says_what_was_tried() {
        let tmp = scratch("nothing");
        let dir = tmp.path().to_path_buf();
        let home = dir.display().to_string();
        let error = resolve(&source(&dir), &env(&[("HOME", &home)]))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("$KUBECONFIG is unset"), "{error}");
        assert!(
            error.contains(&dir.join(".kube").join("config").display().to_string()),
            "{error}"
        );
        assert!(
            error.contains("KUBERNETES_SERVICE_HOST is unset"),
            "{error}"
        );
        let with_context = ClusterSource {
            context: Some("dev".into()),
            ..source(&dir)
        };
        let error = resolve(&with_context, &env(&[("HOME", &home)]))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--context `dev` needs a kubeconfig"),
            "{error}"
        );
    }

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]\ncurrent-context: x\n";

    #[tokio::test]
    async fn a_kubeconfig_wins_over_in_cluster_and_gives_the_context_namespace() {
        let tmp = scratch("kubeconfig");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, Some("reconcile-system"));
        let home = dir.join("home");
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(home.join(".kube").join("config"), KUBECONFIG).unwrap();
        let home = home.display().to_string();
        let pod = [(SERVICE_HOST, "10.0.0.1"), (SERVICE_PORT, "443")];
        let vars = env(&[("HOME", home.as_str()), pod[0], pod[1]]);
        let found = resolve(&source(&dir), &vars).await.unwrap();
        assert!(
            matches!(found.origin, Origin::Kubeconfig(ref what) if what.ends_with(".kube/config"))
        );
        assert_eq!(found.config.cluster_url, "https://192.0.2.1:6443/");
        assert_eq!(found.namespace().unwrap(), "team");

        let other = dir.join("other-kubeconfig");
        std::fs::write(&other, KUBECONFIG.replace("192.0.2.1", "192.0.2.2")).unwrap();
        let from_env = other.display().to_string();
        let vars = env(&[
            ("HOME", home.as_str()),
            ("KUBECONFIG", &from_env),
            pod[0],
            pod[1],
        ]);
        let found = resolve(&source(&dir), &vars).await.unwrap();
        assert_eq!(found.config.cluster_url, "https://192.0.2.2:6443/");

        let explicit = dir.join("explicit");
        std::fs::write(&explicit, KUBECONFIG.replace("192.0.2.1", "192.0.2.3")).unwrap();
        let flagged = ClusterSource {
            kubeconfig: Some(explicit),
            ..source(&dir)
        };
        let found = resolve(&flagged, &vars).await.unwrap();
        assert_eq!(found.config.cluster_url, "https://192.0.2.3:6443/");
    }

    #[tokio::test]
    async fn a_broken_kubeconfig_is_an_error_not_a_fall_back_to_in_cluster() {
        let tmp = scratch("broken");
        let dir = tmp.path().to_path_buf();
        service_account(&dir, Some("reconcile-system"));
        let broken = dir.join("broken");
        std::fs::write(&broken, "clusters: [").unwrap();
        let from_env = broken.display().to_string();
        let vars = env(&[
            ("KUBECONFIG", &from_env),
            (SERVICE_HOST, "10.0.0.1"),
            (SERVICE_PORT, "443"),
        ]);
        let error = resolve(&source(&dir), &vars).await.unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("kubeconfig $KUBECONFIG={from_env} is not usable")),
            "{error}"
        );
    }
}
