//! Plugin modules in OCI registries: pulled by digest (a tag resolved to one) in the CNCF wasm
//! artifact layout, verified, and kept on disk by digest; `reconcile-host push` publishes them.
//!
//! # Flow
//! [`Registry::pull`] parses the reference; when it (or the pin) names a digest already pulled,
//! the module is read from [`ModuleStore`] with no request (hashed again on its first use in the
//! process). Otherwise oci-client exchanges the credentials for a token when the registry asks
//! for one, and the pull's own GETs (`fetch.rs`) fetch the manifest (checking its digest when one
//! was asked for), accept one wasm layer, stream it into a temporary file while hashing and
//! counting, and rename it to `<layer sha256>.wasm`.
//!
//! # Guarantees
//! - The bytes at [`Pulled::path`] hash to [`Pulled::layer_digest`], which the manifest names;
//!   the manifest hashes to the digest asked for. A mismatch is refused, naming both digests.
//! - A module is at most [`MAX_MODULE_BYTES`], a manifest at most [`MAX_MANIFEST_BYTES`], both
//!   bounded while they stream in; paths on disk come from verified digests only.
//! - A registry's error text is never repeated: errors name its HTTP status and OCI error
//!   codes. A manifest is fetched from the registry's origin only; a layer may be redirected
//!   to another host, which gets no credentials.
//! - Plain HTTP only for `oci.insecureRegistries`; credentials are never logged.
//!
//! # Errors
//! [`OciError`]: [`OciError::is_unreachable`] tells a registry that did not answer (back off and
//! retry) from one that refused, had nothing, or served altered content.

mod auth;
mod cache;
mod error;
mod fetch;
#[cfg(test)]
mod hostile;
mod layout;
pub mod push;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use base64::Engine as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest as _, Sha256};

use crate::config::OciSettings;
pub use auth::Credentials;
pub use cache::ModuleStore;
pub use error::OciError;
use fetch::Fetch;
pub use fetch::MAX_MANIFEST_BYTES;
use layout::wasm_layer;

/// The largest module the host accepts from a registry (the Python components are 18 MB).
pub const MAX_MODULE_BYTES: u64 = crate::bounded_read::MAX_MODULE_BYTES;
/// The CNCF wasm artifact's config media type.
pub const CNCF_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The CNCF wasm artifact's layer media type.
pub const CNCF_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// How long a connection to a registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a registry may stay silent mid-answer.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// A module pulled from a registry, on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pulled {
    /// The manifest's digest, `sha256:…`: what a tag resolved to, to pin.
    pub digest: String,
    /// The wasm layer's digest, `sha256:…`.
    pub layer_digest: String,
    /// The component's bytes, `<cache dir>/<layer sha256 hex>.wasm`.
    pub path: PathBuf,
    /// The module came from the disk cache: no download (and no request at all when pulled by a
    /// digest pulled before).
    pub from_cache: bool,
}

/// A registry client with the host's `oci` settings and a disk cache of modules.
pub struct Registry {
    /// Built at the first request: loading the system's CA roots takes a while, and a pull
    /// from the disk cache needs no client.
    client: tokio::sync::OnceCell<Client>,
    /// The client of pulls' own GETs ([`Fetch`]), built on first use.
    http: tokio::sync::OnceCell<reqwest::Client>,
    insecure: Vec<String>,
    certificates: Vec<Certificate>,
    credentials: Credentials,
    store: ModuleStore,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("credentials", &self.credentials)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A client for `settings`, keeping modules in `cache_dir`.
    ///
    /// # Errors
    /// When the docker config or a CA file cannot be used, or the client cannot be built.
    pub fn new(settings: &OciSettings, cache_dir: PathBuf) -> Result<Self, OciError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let credentials = match &settings.docker_config {
            Some(path) => Credentials::load(path)?,
            None => Credentials::default(),
        };
        let mut extra_root_certificates = Vec::new();
        for path in &settings.ca_files {
            let data = std::fs::read(path).map_err(|error| OciError::CaFile {
                path: path.clone(),
                problem: error.to_string(),
            })?;
            if !String::from_utf8_lossy(&data).contains("-----BEGIN CERTIFICATE-----") {
                return Err(OciError::CaFile {
                    path: path.clone(),
                    problem: "it holds no `-----BEGIN CERTIFICATE-----` block".to_owned(),
                });
            }
            extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        Ok(Self {
            client: tokio::sync::OnceCell::new(),
            http: tokio::sync::OnceCell::new(),
            insecure: settings.insecure_registries.clone(),
            certificates: extra_root_certificates,
            credentials,
            store: ModuleStore::new(cache_dir),
        })
    }

    /// The disk cache.
    #[must_use]
    pub fn store(&self) -> &ModuleStore {
        &self.store
    }

    /// The HTTP client, built on first use.
    pub(crate) async fn client(&self) -> Result<&Client, OciError> {
        self.client
            .get_or_try_init(|| async {
                let config = ClientConfig {
                    protocol: ClientProtocol::HttpsExcept(self.insecure.clone()),
                    extra_root_certificates: self.certificates.clone(),
                    platform_resolver: None,
                    connect_timeout: Some(CONNECT_TIMEOUT),
                    read_timeout: Some(READ_TIMEOUT),
                    user_agent: concat!("reconcile-host/", env!("CARGO_PKG_VERSION")),
                    ..ClientConfig::default()
                };
                Client::try_from(config).map_err(OciError::Client)
            })
            .await
    }

    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Pulls the module `reference` names (`<registry>/<repo>@sha256:…` or `…:<tag>`). `pin`, a
    /// digest recorded earlier for a tag, means "pull this digest, do not resolve the tag again".
    ///
    /// # Errors
    /// See [`OciError`]; nothing is written under a digest's name unless it verified.
    pub async fn pull(&self, reference: &str, pin: Option<&str>) -> Result<Pulled, OciError> {
        let parsed = parse(reference)?;
        let registry = parsed.resolve_registry().to_owned();
        // A digest in the reference is what was asked for; a pin stands in only for a tag.
        let wanted = parsed.digest().or(pin).map(str::to_owned);
        let target = match &wanted {
            Some(digest) => {
                if digest_hex(digest).is_none() {
                    return Err(OciError::InvalidReference {
                        reference: reference.to_owned(),
                        problem: format!(
                            "digest `{}` is not sha256: and 64 hex digits",
                            short_str(digest)
                        ),
                    });
                }
                Reference::with_digest(
                    parsed.registry().to_owned(),
                    parsed.repository().to_owned(),
                    digest.clone(),
                )
            }
            None => parsed.clone(),
        };
        if let Some(digest) = &wanted
            && let Some(hit) = self.cached(digest).await
        {
            return Ok(hit);
        }
        let fetch = self.fetch(&target, &registry, reference).await?;
        let body = fetch
            .manifest(
                self.url(&target, "manifests")?,
                &format!("{OCI_IMAGE_MEDIA_TYPE}, {IMAGE_MANIFEST_MEDIA_TYPE}"),
            )
            .await?;
        let digest = format!("sha256:{}", cache::hex_encode(Sha256::digest(&body)));
        if let Some(expected) = &wanted
            && *expected != digest
        {
            return Err(OciError::DigestMismatch {
                registry,
                reference: reference.to_owned(),
                what: "manifest",
                expected: expected.clone(),
                actual: digest,
            });
        }
        let layer = wasm_layer(&body).map_err(|problem| OciError::NotAComponent {
            registry: registry.clone(),
            reference: reference.to_owned(),
            problem,
        })?;
        let layer_hex = digest_hex(&layer.digest)
            .ok_or_else(|| OciError::NotAComponent {
                registry: registry.clone(),
                reference: reference.to_owned(),
                problem: format!(
                    "its layer digest `{}` is not sha256",
                    short_str(&layer.digest)
                ),
            })?
            .to_owned();
        let too_large = |size| OciError::TooLarge {
            registry: registry.clone(),
            reference: reference.to_owned(),
            size,
            limit: MAX_MODULE_BYTES,
        };
        if u64::try_from(layer.size).unwrap_or(u64::MAX) > MAX_MODULE_BYTES {
            return Err(too_large(u64::try_from(layer.size).unwrap_or(u64::MAX)));
        }
        let manifest_hex = digest_hex(&digest).unwrap_or_default().to_owned();
        let cache_error = |path: PathBuf| move |source| OciError::Cache { path, source };
        let from_cache = self.store.has_module(&layer_hex).await;
        if !from_cache {
            self.download(&fetch, &target, &layer, &layer_hex).await?;
        }
        self.store
            .record_manifest(&manifest_hex, &layer.digest)
            .map_err(cache_error(self.store.dir().to_owned()))?;
        Ok(Pulled {
            digest,
            layer_digest: layer.digest.clone(),
            path: self.store.module_path(&layer_hex),
            from_cache,
        })
    }

    /// The module of manifest `digest` from disk, if it was pulled before and is intact.
    async fn cached(&self, digest: &str) -> Option<Pulled> {
        let layer = self.store.layer_of(digest_hex(digest)?)?;
        let layer_hex = digest_hex(&layer)?;
        self.store.has_module(layer_hex).await.then(|| Pulled {
            digest: digest.to_owned(),
            path: self.store.module_path(layer_hex),
            layer_digest: layer.clone(),
            from_cache: true,
        })
    }

    /// The GETs of one pull of `target`, with the credentials for its registry: oci-client
    /// exchanges them for a token when the registry asks for one.
    async fn fetch<'a>(
        &'a self,
        target: &Reference,
        registry: &'a str,
        reference: &'a str,
    ) -> Result<Fetch<'a>, OciError> {
        let auth = self.credentials.for_registry(registry);
        let token = self
            .client()
            .await?
            .auth(target, &auth, RegistryOperation::Pull)
            .await
            .map_err(|error| OciError::from_client(registry, reference, "manifest", error))?;
        let authorization = match (token, &auth) {
            (Some(token), _) => Some(format!("Bearer {token}")),
            (None, RegistryAuth::Basic(user, password)) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
            (None, _) => None,
        };
        let authorization = match authorization {
            Some(value) => {
                let mut value =
                    http::HeaderValue::from_str(&value).map_err(|_| OciError::Unauthorized {
                        registry: registry.to_owned(),
                        reference: reference.to_owned(),
                        detail: "the credentials are not a valid HTTP header value".to_owned(),
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(Fetch {
            http: self.http().await?,
            registry,
            reference,
            authorization,
        })
    }

    /// The HTTP client of pulls' own GETs, built on first use: redirects are followed by
    /// [`Fetch`], not by the client.
    async fn http(&self) -> Result<&reqwest::Client, OciError> {
        self.http
            .get_or_try_init(|| async {
                let mut builder = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .connect_timeout(CONNECT_TIMEOUT)
                    .read_timeout(READ_TIMEOUT)
                    .user_agent(concat!("reconcile-host/", env!("CARGO_PKG_VERSION")));
                let mut roots = Vec::new();
                for certificate in &self.certificates {
                    roots.push(
                        reqwest::Certificate::from_pem(&certificate.data)
                            .map_err(|error| OciError::Client(error.into()))?,
                    );
                }
                builder = builder.tls_certs_merge(roots);
                builder
                    .build()
                    .map_err(|error| OciError::Client(error.into()))
            })
            .await
    }

    /// `<scheme>://<registry>/v2/<repository>/<kind>/<digest or tag>`: HTTPS unless the
    /// registry is listed in `oci.insecureRegistries`.
    fn url(&self, target: &Reference, kind: &str) -> Result<reqwest::Url, OciError> {
        let object = target
            .digest()
            .or(target.tag())
            .unwrap_or("latest")
            .to_owned();
        self.url_of(target, kind, &object)
    }

    fn url_of(
        &self,
        target: &Reference,
        kind: &str,
        object: &str,
    ) -> Result<reqwest::Url, OciError> {
        let registry = target.resolve_registry();
        let scheme = if self.insecure.iter().any(|host| host == registry) {
            "http"
        } else {
            "https"
        };
        let text = format!(
            "{scheme}://{registry}/v2/{}/{kind}/{object}",
            target.repository()
        );
        reqwest::Url::parse(&text).map_err(|error| OciError::InvalidReference {
            reference: short_str(&target.whole()),
            problem: format!("it gives no usable URL: {error}"),
        })
    }

    /// Streams the layer into a temporary file, hashing and counting, then renames it to its
    /// digest's name once verified.
    async fn download(
        &self,
        fetch: &Fetch<'_>,
        target: &Reference,
        layer: &OciDescriptor,
        layer_hex: &str,
    ) -> Result<(), OciError> {
        use std::io::Write as _;
        let (registry, reference) = (fetch.registry, fetch.reference);
        let cache_error = |source| OciError::Cache {
            path: self.store.dir().to_owned(),
            source,
        };
        // The layer is fetched from the registry only: a descriptor's `urls` (foreign layers)
        // would send the host to any address the manifest names.
        let mut response = fetch
            .layer(self.url_of(target, "blobs", &layer.digest)?)
            .await?;
        if let Some(length) = response.content_length()
            && length > MAX_MODULE_BYTES
        {
            return Err(OciError::TooLarge {
                registry: registry.to_owned(),
                reference: reference.to_owned(),
                size: length,
                limit: MAX_MODULE_BYTES,
            });
        }
        let (temp, file) = self.store.temp_file().map_err(cache_error)?;
        let mut file = std::io::BufWriter::new(file);
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let result: Result<(), OciError> = async {
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|error| fetch.transport(error))?
            {
                size += chunk.len() as u64;
                if size > MAX_MODULE_BYTES {
                    return Err(OciError::TooLarge {
                        registry: registry.to_owned(),
                        reference: reference.to_owned(),
                        size,
                        limit: MAX_MODULE_BYTES,
                    });
                }
                hasher.update(&chunk);
                file.write_all(&chunk).map_err(cache_error)?;
            }
            let actual = cache::hex_encode(hasher.finalize());
            if actual != layer_hex {
                return Err(OciError::DigestMismatch {
                    registry: registry.to_owned(),
                    reference: reference.to_owned(),
                    what: "layer",
                    expected: layer.digest.clone(),
                    actual: format!("sha256:{actual}"),
                });
            }
            let file = file
                .into_inner()
                .map_err(|error| cache_error(error.into_error()))?;
            file.sync_all().map_err(cache_error)?;
            std::fs::rename(&temp, self.store.module_path(layer_hex)).map_err(cache_error)?;
            self.store.remember(layer_hex);
            Ok(())
        }
        .await;
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }
}

/// Parses a reference, refusing one with a digest that is not sha256.
fn parse(reference: &str) -> Result<Reference, OciError> {
    let invalid = |problem: String| OciError::InvalidReference {
        reference: short_str(reference),
        problem,
    };
    if reference.len() > 1024 {
        return Err(invalid("longer than 1024 characters".to_owned()));
    }
    let parsed = Reference::from_str(reference).map_err(|error| invalid(error.to_string()))?;
    if let Some(digest) = parsed.digest()
        && digest_hex(digest).is_none()
    {
        return Err(invalid(
            "its digest is not sha256: and 64 hex digits".to_owned(),
        ));
    }
    Ok(parsed)
}

/// The hex of a `sha256:<64 lowercase hex>` digest.
#[must_use]
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(hex)
}

fn short_str(text: &str) -> String {
    let shown: String = text.chars().take(120).collect();
    if shown.len() < text.len() {
        format!("{shown}…")
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_sha256_with_64_lowercase_hex_digits() {
        assert!(digest_hex(&format!("sha256:{}", "a".repeat(64))).is_some());
        for bad in [
            "sha256:abc",
            "sha512:aa",
            &format!("sha256:{}", "A".repeat(64)),
            &format!("sha256:../{}", "a".repeat(61)),
        ] {
            assert!(digest_hex(bad).is_none(), "{bad}");
        }
        assert!(matches!(
            parse("r.example/x@sha256:abc"),
            Err(OciError::InvalidReference { .. })
        ));
    }

    /// A pin (a tag's earlier resolution) never overrides the digest a reference names: the
    /// module pulled before under the reference's digest is served from the cache (no request:
    /// the registry here is unreachable), whatever the pin says.
    #[tokio::test]
    async fn a_reference_digest_wins_over_a_pin() {
        let tmp = tempfile::tempdir().expect("scratch dir");
        let dir = tmp.path().join("cache");
        let registry = Registry::new(&OciSettings::default(), dir.clone()).expect("registry");
        let module = b"\0asm module bytes";
        let layer_hex = cache::hex_encode(Sha256::digest(module));
        let manifest_hex = "a".repeat(64);
        std::fs::create_dir_all(&dir).expect("cache dir");
        std::fs::write(registry.store().module_path(&layer_hex), module).expect("module");
        registry
            .store()
            .record_manifest(&manifest_hex, &format!("sha256:{layer_hex}"))
            .expect("manifest record");
        let reference = format!("127.0.0.1:1/plugins/x@sha256:{manifest_hex}");
        let pin = format!("sha256:{}", "b".repeat(64));
        let pulled = registry
            .pull(&reference, Some(&pin))
            .await
            .expect("served from the cache");
        assert_eq!(pulled.digest, format!("sha256:{manifest_hex}"));
        assert!(pulled.from_cache);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_default_cache_sits_beside_the_compiled_modules() {
        let settings = OciSettings::default();
        assert_eq!(
            settings.cache_dir_beside(Some(PathBuf::from("/c/reconcile-host/modules"))),
            Some(PathBuf::from("/c/reconcile-host/oci"))
        );
    }
}
