//! The `oci:` section of the host's configuration: insecure hosts, extra CAs, the docker
//! config with credentials, and where pulled modules are kept.

use std::path::PathBuf;

use serde::Deserialize;

/// `oci:` settings, shared by pulls and `reconcile-host push`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OciSettings {
    /// Registries (`host:port`, as written in references) reached over plain HTTP; every other
    /// registry is reached over HTTPS only.
    pub insecure_registries: Vec<String>,
    /// PEM files of CA certificates trusted besides the system's, for registries with private
    /// certificates.
    pub ca_files: Vec<PathBuf>,
    /// A docker `config.json` holding credentials per registry (`auths`: `auth`,
    /// `username`/`password` or `registrytoken`; one with an `identitytoken`, an OAuth2 refresh
    /// token, is refused); `None`: anonymous.
    pub docker_config: Option<PathBuf>,
    /// Where pulled modules are kept; `None`: `oci` beside the compiled-module cache
    /// (`$XDG_CACHE_HOME/reconcile-host/oci` or `~/.cache/reconcile-host/oci`).
    pub cache_dir: Option<PathBuf>,
}

impl OciSettings {
    /// The module cache directory in effect, given the compiled-module cache directory.
    #[must_use]
    pub fn cache_dir_beside(&self, module_cache: Option<PathBuf>) -> Option<PathBuf> {
        if let Some(dir) = &self.cache_dir {
            return Some(dir.clone());
        }
        let modules = module_cache?;
        Some(match modules.parent() {
            Some(parent) if modules.ends_with("modules") => parent.join("oci"),
            _ => modules.join("oci"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HostConfig;

    #[test]
    fn the_oci_section_of_the_host_configuration_parses() {
        let config = HostConfig::parse(
            "oci:\n  insecureRegistries: [\"localhost:5000\"]\n  caFiles: [/etc/ca.pem]\n  \
             dockerConfig: /etc/docker/config.json\n  cacheDir: /var/cache/oci\n",
        )
        .unwrap();
        assert_eq!(
            config.oci,
            OciSettings {
                insecure_registries: vec!["localhost:5000".to_owned()],
                ca_files: vec![PathBuf::from("/etc/ca.pem")],
                docker_config: Some(PathBuf::from("/etc/docker/config.json")),
                cache_dir: Some(PathBuf::from("/var/cache/oci")),
            }
        );
        assert_eq!(HostConfig::parse("").unwrap().oci, OciSettings::default());
        let error = HostConfig::parse("oci:\n  insecure: [x]\n").unwrap_err();
        assert!(error.contains("insecure"), "{error}");
    }
}
