//! Registry credentials from a docker `config.json`: `auths.<host>.auth` (base64 of
//! `user:password`), `username`/`password`, or `registrytoken` (a bearer token, sent as is).
//! An `identitytoken` is an OAuth2 refresh token, which the host does not exchange: a config
//! with one is refused when it is read, never sent as a bearer token.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::error::OciError;

/// The largest docker config the host reads.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Credentials per registry host (`host[:port]`).
#[derive(Clone, Default)]
pub struct Credentials {
    by_host: BTreeMap<String, RegistryAuth>,
}

impl std::fmt::Debug for Credentials {
    /// Hosts only: never the secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_host.keys()).finish()
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Default, Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
    registrytoken: Option<String>,
}

impl Credentials {
    /// Reads the docker config at `path`.
    ///
    /// # Errors
    /// [`OciError::DockerConfig`] when it cannot be read, is too large, or an entry is malformed.
    pub fn load(path: &Path) -> Result<Self, OciError> {
        let bad = |problem: String| OciError::DockerConfig {
            path: path.to_owned(),
            problem,
        };
        let size = std::fs::metadata(path)
            .map_err(|error| bad(error.to_string()))?
            .len();
        if size > MAX_CONFIG_BYTES {
            return Err(bad(format!(
                "it is {size} bytes, more than {MAX_CONFIG_BYTES}"
            )));
        }
        let text = std::fs::read(path).map_err(|error| bad(error.to_string()))?;
        Self::parse(&text).map_err(bad)
    }

    /// Parses a docker config's JSON text.
    ///
    /// # Errors
    /// A message naming the host whose entry is malformed or holds an `identitytoken` (never
    /// the secret).
    pub fn parse(text: &[u8]) -> Result<Self, String> {
        let config: DockerConfig =
            serde_json::from_slice(text).map_err(|error| format!("not valid JSON: {error}"))?;
        let mut by_host = BTreeMap::new();
        for (key, entry) in config.auths {
            let host = normalize(&key);
            let auth = entry_auth(entry).map_err(|problem| format!("`auths.{key}`: {problem}"))?;
            if let Some(auth) = auth {
                by_host.insert(host, auth);
            }
        }
        Ok(Self { by_host })
    }

    /// The credentials for `registry` (`host[:port]`), anonymous when none are configured.
    #[must_use]
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        self.by_host
            .get(&normalize(registry))
            .cloned()
            .unwrap_or(RegistryAuth::Anonymous)
    }
}

fn entry_auth(entry: AuthEntry) -> Result<Option<RegistryAuth>, String> {
    if entry
        .identitytoken
        .as_ref()
        .is_some_and(|token| !token.is_empty())
    {
        return Err(
            "`identitytoken` is an OAuth2 refresh token, which the host does not \
                    exchange for an access token (nor sends as one); give `username` and \
                    `password` instead (for Azure Container Registry: the token as `password` \
                    with `username` `00000000-0000-0000-0000-000000000000`)"
                .to_owned(),
        );
    }
    if let Some(token) = entry.registrytoken
        && !token.is_empty()
    {
        return Ok(Some(RegistryAuth::Bearer(token)));
    }
    if let Some(encoded) = entry.auth
        && !encoded.is_empty()
    {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| "`auth` is not base64".to_owned())?;
        let decoded =
            String::from_utf8(decoded).map_err(|_| "`auth` is not base64 of UTF-8".to_owned())?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| "`auth` is not base64 of `user:password`".to_owned())?;
        return Ok(Some(RegistryAuth::Basic(
            user.to_owned(),
            password.to_owned(),
        )));
    }
    match (entry.username, entry.password) {
        (Some(user), Some(password)) => Ok(Some(RegistryAuth::Basic(user, password))),
        (None, None) => Ok(None),
        _ => Err("give both `username` and `password`".to_owned()),
    }
}

/// `https://host:port/v1/` → `host:port`; Docker Hub's historical key → `docker.io`.
fn normalize(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = without_scheme.split('/').next().unwrap_or(without_scheme);
    match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        other => other.to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_username_password_and_tokens_are_read_per_host() {
        let config = br#"{"auths": {
            "https://a.example:5000/v1/": {"auth": "dXNlcjpwYTpzcw=="},
            "b.example": {"username": "u", "password": "p"},
            "c.example": {"registrytoken": "tok"},
            "d.example": {}
        }}"#;
        let credentials = Credentials::parse(config).unwrap();
        assert_eq!(
            credentials.for_registry("a.example:5000"),
            RegistryAuth::Basic("user".into(), "pa:ss".into())
        );
        assert_eq!(
            credentials.for_registry("b.example"),
            RegistryAuth::Basic("u".into(), "p".into())
        );
        assert_eq!(
            credentials.for_registry("c.example"),
            RegistryAuth::Bearer("tok".into())
        );
        assert_eq!(
            credentials.for_registry("d.example"),
            RegistryAuth::Anonymous
        );
        assert!(!format!("{credentials:?}").contains("pa:ss"));
    }

    #[test]
    fn an_identity_token_is_refused_naming_the_entry_and_the_fix() {
        let error =
            Credentials::parse(br#"{"auths": {"r.example": {"identitytoken": "refresh-secret"}}}"#)
                .unwrap_err();
        assert!(error.contains("`auths.r.example`"), "{error}");
        assert!(error.contains("`username` and `password`"), "{error}");
        assert!(
            error.contains("00000000-0000-0000-0000-000000000000"),
            "{error}"
        );
        assert!(!error.contains("refresh-secret"), "{error}");
    }

    #[test]
    fn a_malformed_entry_is_named_without_its_secret() {
        let error = Credentials::parse(br#"{"auths": {"r": {"auth": "c2VjcmV0"}}}"#).unwrap_err();
        assert!(error.contains("`auths.r`"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }
}
