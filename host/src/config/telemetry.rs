//! The `telemetry:` section of the host's configuration: where `/metrics`, `/debug/*`,
//! `/healthz` and `/readyz` are served, and who may read the first two.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// `telemetry:` settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Where `/metrics`, `/debug/*`, `/healthz` and `/readyz` are served.
    pub address: SocketAddr,
    /// Who may read `/metrics` and `/debug/*`.
    pub authorization: TelemetryAuthorization,
    /// The certificate served when the port is secured; none: a self-signed one made at start.
    pub tls: TelemetryTls,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([0, 0, 0, 0], 8080)),
            authorization: TelemetryAuthorization::default(),
            tls: TelemetryTls::default(),
        }
    }
}

/// Who may read `/metrics` and `/debug/*` (`/healthz` and `/readyz` are open to all, for the
/// kubelet's probes).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "camelCase")]
pub enum TelemetryAuthorization {
    /// `kubernetes` when the host runs in a cluster (on its in-cluster service account), else
    /// `none`.
    #[default]
    Auto,
    /// HTTPS, and a bearer token the API server authenticates (TokenReview) and authorizes for
    /// the path and verb (SubjectAccessReview, `nonResourceURLs`), as controller-runtime's
    /// secure metrics serving does.
    Kubernetes,
    /// Plain HTTP, no checks: for a port only trusted clients reach (loopback, `dev`).
    None,
}

/// `telemetry.tls`: a PEM certificate chain and key (both, or neither).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TelemetryTls {
    /// The certificate chain, leaf first.
    pub cert_file: Option<PathBuf>,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
}
