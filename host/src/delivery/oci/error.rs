//! Why a pull or a push failed, with the registry, the reference and the fix in every message;
//! "unreachable" kept apart from answers the registry gave, so callers know when to back off.

use std::path::PathBuf;

use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};

/// A failed registry operation.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse, or its digest is not `sha256:` and 64 hex digits.
    #[error(
        "`{reference}` is not a usable module reference ({problem}); write \
         `<registry>/<repository>@sha256:<64 hex digits>` or `<registry>/<repository>:<tag>`"
    )]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        problem: String,
    },
    /// No answer from the registry: connection refused or reset, DNS, timeout. Transient: try
    /// again later with backoff.
    #[error(
        "cannot reach registry {registry} for {reference}; check that it runs and that this \
         machine can reach it, then try again"
    )]
    Unreachable {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// The transport's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The registry answered that it cannot serve now (HTTP 5xx, or 429 too many requests).
    /// Transient, like [`Unreachable`](Self::Unreachable).
    #[error(
        "registry {registry} is unavailable for {reference} ({detail}); try again later, or ask \
         its operators"
    )]
    Unavailable {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// The TLS handshake failed: a plain-HTTP registry, or a certificate no trusted CA signed.
    #[error(
        "TLS with registry {registry} failed for {reference}: if it serves plain HTTP, list \
         `{registry}` in the configuration's `oci.insecureRegistries` (or pass --insecure); if \
         its certificate comes from a private CA, add that CA's PEM file to `oci.caFiles`"
    )]
    Tls {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// The transport's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The registry wants credentials, or refused the ones given.
    #[error(
        "registry {registry} refused {reference} without valid credentials; add an entry for \
         `{registry}` to the docker config.json named by `oci.dockerConfig` (or \
         --docker-config): `auths.\"{registry}\".auth` (base64 of user:password), or \
         username/password"
    )]
    Unauthorized {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// The repository, tag or digest is not in the registry.
    #[error(
        "registry {registry} has no {reference}; check the repository, tag and digest (push it \
         with `reconcile-host push`)"
    )]
    NotFound {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// The registry answered with another error.
    #[error("registry {registry} refused {reference}: {detail}; fix what it names and retry")]
    Refused {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// The bytes received do not hash to the digest asked for.
    #[error(
        "the {what} of {reference} from registry {registry} has digest {actual}, not the \
         {expected} asked for: refused; the registry or something between serves altered \
         content, or the digest is wrong — push again and use the digest `push` prints"
    )]
    DigestMismatch {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// `manifest` or `layer`.
        what: &'static str,
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The artifact is not a wasm component in a layout the host accepts.
    #[error(
        "{reference} in registry {registry} is not a wasm component artifact ({problem}); push \
         the component with `reconcile-host push` (config \
         `application/vnd.wasm.config.v0+json`, one `application/wasm` layer)"
    )]
    NotAComponent {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// What the manifest holds instead.
        problem: String,
    },
    /// The module is larger than the host accepts.
    #[error(
        "the module of {reference} in registry {registry} is {size} bytes, more than the \
         {limit} the host accepts; make the component smaller"
    )]
    TooLarge {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// Its size (announced or counted).
        size: u64,
        /// [`MAX_MODULE_BYTES`](super::MAX_MODULE_BYTES).
        limit: u64,
    },
    /// The manifest is larger than the host accepts.
    #[error(
        "the manifest of {reference} in registry {registry} is {size} bytes or more, more than \
         the {limit} the host accepts: refused; a wasm component's manifest is a few hundred \
         bytes, so check the reference"
    )]
    ManifestTooLarge {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// Its size (announced, or counted so far).
        size: u64,
        /// [`MAX_MANIFEST_BYTES`](super::fetch::MAX_MANIFEST_BYTES).
        limit: u64,
    },
    /// The registry redirected a GET where the host does not follow.
    #[error(
        "registry {registry} redirected the {what} of {reference} where the host does not \
         follow ({problem}); serve it from the registry's own origin over HTTPS, with at most \
         5 redirects"
    )]
    Redirect {
        /// `host[:port]`.
        registry: String,
        /// The reference.
        reference: String,
        /// `manifest` or `layer`.
        what: &'static str,
        /// Which redirect, and why it is refused.
        problem: String,
    },
    /// The module cache directory cannot be used.
    #[error(
        "cannot use the OCI module cache at {path}; make it writable or set `oci.cacheDir` to \
         another directory"
    )]
    Cache {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The docker config.json cannot be read or parsed.
    #[error(
        "cannot use docker config {path}: {problem}; fix the file or `oci.dockerConfig` (it \
         holds `{{\"auths\": {{\"<host:port>\": {{\"auth\": \"<base64 user:password>\"}}}}}}`)"
    )]
    DockerConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A CA file cannot be read or holds no PEM certificate.
    #[error("cannot use CA file {path} from `oci.caFiles`: {problem}; give PEM certificate files")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The HTTP client could not be built from the settings.
    #[error("cannot build the registry client from the `oci` settings")]
    Client(#[source] OciDistributionError),
}

impl OciError {
    /// Whether the registry could not be reached, or said it cannot serve now (5xx, 429): retry
    /// with backoff. Any other error is an answer that retrying will not change (refused, not
    /// found, altered content) or a problem with the artifact or the settings.
    #[must_use]
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Unavailable { .. })
    }

    /// Sorts an `oci-client` error into one of the variants above.
    pub(super) fn from_client(
        registry: &str,
        reference: &str,
        what: &'static str,
        error: OciDistributionError,
    ) -> Self {
        let registry = registry.to_owned();
        let reference = reference.to_owned();
        match error {
            OciDistributionError::RequestError(error) => transport(registry, reference, error),
            OciDistributionError::IoError(error) => match verification(error) {
                Ok((expected, actual)) => Self::DigestMismatch {
                    registry,
                    reference,
                    what,
                    expected,
                    actual,
                },
                Err(error) => transport(registry, reference, error),
            },
            OciDistributionError::DigestError(DigestError::VerificationError {
                expected,
                actual,
            }) => Self::DigestMismatch {
                registry,
                reference,
                what,
                expected,
                actual,
            },
            OciDistributionError::UnauthorizedError { url } => Self::Unauthorized {
                registry,
                reference,
                detail: format!("401 from {url}"),
            },
            // Its text is the token service's answer: outside input, not repeated.
            OciDistributionError::AuthenticationFailure(_) => Self::Unauthorized {
                registry,
                reference,
                detail: "the token service refused the credentials".to_owned(),
            },
            OciDistributionError::ImageManifestNotFoundError(detail) => Self::NotFound {
                registry,
                reference,
                detail,
            },
            OciDistributionError::RegistryError { envelope, url } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let detail = format!("{envelope} ({url})");
                if codes
                    .iter()
                    .any(|code| matches!(code, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    Self::Unauthorized {
                        registry,
                        reference,
                        detail,
                    }
                } else if codes.iter().any(|code| {
                    matches!(
                        code,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NameUnknown
                    )
                }) {
                    Self::NotFound {
                        registry,
                        reference,
                        detail,
                    }
                } else if codes
                    .iter()
                    .any(|code| matches!(code, OciErrorCode::Toomanyrequests))
                {
                    Self::Unavailable {
                        registry,
                        reference,
                        detail,
                    }
                } else {
                    Self::Refused {
                        registry,
                        reference,
                        detail,
                    }
                }
            }
            OciDistributionError::ServerError { code, url, message } => {
                let detail = format!("HTTP {code} from {url}: {}", short(&message));
                match code {
                    401 | 403 => Self::Unauthorized {
                        registry,
                        reference,
                        detail,
                    },
                    404 => Self::NotFound {
                        registry,
                        reference,
                        detail,
                    },
                    429 | 500..=599 => Self::Unavailable {
                        registry,
                        reference,
                        detail,
                    },
                    _ => Self::Refused {
                        registry,
                        reference,
                        detail,
                    },
                }
            }
            other => Self::Refused {
                registry,
                reference,
                detail: short(&other.to_string()),
            },
        }
    }
}

impl OciError {
    /// Sorts a registry's error answer to a GET, known by its HTTP `status` and its OCI error
    /// `codes` only (its text is never kept), into one of the variants above.
    pub(super) fn from_answer(
        registry: &str,
        reference: &str,
        status: u16,
        codes: &[String],
        detail: String,
    ) -> Self {
        let registry = registry.to_owned();
        let reference = reference.to_owned();
        let has = |names: &[&str]| codes.iter().any(|code| names.contains(&code.as_str()));
        if has(&["UNAUTHORIZED", "DENIED"]) || matches!(status, 401 | 403) {
            Self::Unauthorized {
                registry,
                reference,
                detail,
            }
        } else if has(&["MANIFEST_UNKNOWN", "BLOB_UNKNOWN", "NAME_UNKNOWN"]) || status == 404 {
            Self::NotFound {
                registry,
                reference,
                detail,
            }
        } else if has(&["TOOMANYREQUESTS"]) || matches!(status, 429 | 500..=599) {
            Self::Unavailable {
                registry,
                reference,
                detail,
            }
        } else {
            Self::Refused {
                registry,
                reference,
                detail,
            }
        }
    }
}

/// The digests of a verification failure a blob stream reports as an I/O error, or the error.
fn verification(error: std::io::Error) -> Result<(String, String), std::io::Error> {
    if !error
        .get_ref()
        .is_some_and(|inner| inner.is::<DigestError>())
    {
        return Err(error);
    }
    let kind = error.kind();
    match error
        .into_inner()
        .map(|inner| inner.downcast::<DigestError>())
    {
        Some(Ok(digest)) => match *digest {
            DigestError::VerificationError { expected, actual } => Ok((expected, actual)),
            other => Err(std::io::Error::new(kind, other)),
        },
        Some(Err(inner)) => Err(std::io::Error::new(kind, inner)),
        None => Err(std::io::Error::from(kind)),
    }
}

/// A transport failure: TLS when a `rustls::Error` is in the chain, else unreachable.
pub(super) fn transport(
    registry: String,
    reference: String,
    error: impl std::error::Error + Send + Sync + 'static,
) -> OciError {
    if is_tls(&error) {
        OciError::Tls {
            registry,
            reference,
            source: Box::new(error),
        }
    } else {
        OciError::Unreachable {
            registry,
            reference,
            source: Box::new(error),
        }
    }
}

/// Whether a `rustls::Error` is in `error`'s chain (looking inside `std::io::Error`s, whose
/// `source` skips the error they wrap). The chain's text is not consulted: a registry or a
/// proxy can put any words there.
fn is_tls(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && is_tls(inner)
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// The first 300 characters of a registry's message: it is outside input.
fn short(text: &str) -> String {
    const MAX: usize = 300;
    let mut shown: String = text.chars().take(MAX).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_connections_are_unreachable_and_tls_failures_are_not() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let error = transport("r:5000".into(), "r:5000/x:1".into(), refused);
        assert!(error.is_unreachable(), "{error}");
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        );
        let error = transport("r:5000".into(), "r:5000/x:1".into(), tls);
        assert!(!error.is_unreachable());
        assert!(
            error.to_string().contains("oci.insecureRegistries"),
            "{error}"
        );
    }

    /// A proxy or registry can write any words into an error: only a `rustls::Error` in the
    /// chain makes a failure a TLS one.
    #[test]
    fn tls_failures_are_known_by_a_rustls_error_not_by_their_words() {
        let words = std::io::Error::other("TLS handshake failed: unknown certificate");
        let error = transport("r:5000".into(), "r:5000/x:1".into(), words);
        assert!(matches!(error, OciError::Unreachable { .. }), "{error}");
    }

    #[test]
    fn registry_status_codes_become_kinds_of_refusal() {
        let server = |code| OciDistributionError::ServerError {
            code,
            url: "http://r/v2/x/manifests/1".into(),
            message: "m".into(),
        };
        let kind = |code| OciError::from_client("r", "r/x:1", "manifest", server(code));
        assert!(matches!(kind(401), OciError::Unauthorized { .. }));
        assert!(matches!(kind(404), OciError::NotFound { .. }));
        assert!(matches!(kind(400), OciError::Refused { .. }));
        assert!(!kind(400).is_unreachable());
        for code in [429, 500, 503] {
            assert!(matches!(kind(code), OciError::Unavailable { .. }));
            assert!(kind(code).is_unreachable(), "{code} is worth a retry");
        }
    }
}
