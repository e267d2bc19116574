//! The `pluginIdentity:` section of the host's configuration: which ServiceAccount a plugin
//! that names none acts as, and whether a plugin may act as the host itself.

use std::fmt;

use label_selector::{is_dns_label, is_dns_subdomain};
use serde::Deserialize;

/// A ServiceAccount, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ServiceAccountRef {
    /// The user the API server authenticates the account as,
    /// `system:serviceaccount:<namespace>:<name>`: what the host impersonates.
    #[must_use]
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// `namespace/name` as a setting writes it (`pluginIdentity.defaultServiceAccount`).
    ///
    /// # Errors
    /// A message naming the problem and the form expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{text}` {why}; write NAMESPACE/NAME of a ServiceAccount, e.g. plugins/website"
            )
        };
        let (namespace, name) = text
            .split_once('/')
            .ok_or_else(|| bad("is not NAMESPACE/NAME"))?;
        if let Some(why) = namespace_problem(namespace) {
            return Err(format!("{why}; write NAMESPACE/NAME of a ServiceAccount"));
        }
        if !is_dns_subdomain(name) {
            return Err(bad("names no valid ServiceAccount (a DNS-1123 subdomain)"));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

fn namespace_problem(namespace: &str) -> Option<String> {
    (!is_dns_label(namespace)).then(|| {
        format!(
            "`{namespace}` is not a valid namespace name; use lowercase letters, digits and `-`, \
             at most 63 characters"
        )
    })
}

/// `pluginIdentity:` settings.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PluginIdentityConfig {
    /// `NAMESPACE/NAME` of the ServiceAccount a plugin acts as when its manifest names none
    /// (`serviceAccountName`); `None`: such a plugin acts as the host.
    #[serde(deserialize_with = "account")]
    pub default_service_account: Option<ServiceAccountRef>,
    /// Refuse every plugin that would act as the host: one naming no ServiceAccount when there
    /// is no default. The lock-down setting of a host shared by teams.
    pub require_service_account: bool,
}

fn account<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ServiceAccountRef>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    text.map(|text| ServiceAccountRef::parse(&text).map_err(serde::de::Error::custom))
        .transpose()
}

impl PluginIdentityConfig {
    /// The ServiceAccount a plugin naming `own` acts as: `own`, else the default; `Ok(None)`
    /// when it acts as the host.
    ///
    /// # Errors
    /// The problem and its fix, when neither is set and a ServiceAccount is required.
    pub fn resolve(
        &self,
        own: Option<&ServiceAccountRef>,
    ) -> Result<Option<ServiceAccountRef>, String> {
        match own.or(self.default_service_account.as_ref()) {
            Some(account) => Ok(Some(account.clone())),
            None if self.require_service_account => Err(
                "missing: this host runs no plugin as itself (pluginIdentity.\
                 requireServiceAccount); add `serviceAccountName` (and \
                 `serviceAccountNamespace`) naming the ServiceAccount the plugin acts as"
                    .to_owned(),
            ),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PluginIdentityConfig, String> {
        serde_yaml_ng::from_str(text).map_err(|error| error.to_string())
    }

    #[test]
    fn a_plugin_acts_as_its_own_account_then_the_default_then_the_host() {
        let own = ServiceAccountRef::parse("team-a/site").unwrap();
        let config = parse("defaultServiceAccount: plugins/default-plugin").unwrap();
        assert_eq!(config.resolve(Some(&own)).unwrap(), Some(own.clone()));
        assert_eq!(
            config.resolve(None).unwrap().unwrap().user(),
            "system:serviceaccount:plugins:default-plugin"
        );
        assert_eq!(PluginIdentityConfig::default().resolve(None).unwrap(), None);
    }

    #[test]
    fn the_lock_down_refuses_a_plugin_that_would_act_as_the_host() {
        let config = parse("requireServiceAccount: true").unwrap();
        let refusal = config.resolve(None).unwrap_err();
        assert!(refusal.contains("serviceAccountName"), "{refusal}");
        let own = ServiceAccountRef::parse("team-a/site").unwrap();
        assert_eq!(config.resolve(Some(&own)).unwrap(), Some(own));
        let defaulted =
            parse("requireServiceAccount: true\ndefaultServiceAccount: plugins/p").unwrap();
        assert!(defaulted.resolve(None).unwrap().is_some());
    }

    #[test]
    fn a_default_that_is_not_namespace_slash_name_is_refused_with_the_form() {
        for bad in ["plugins", "Plugins/p", "plugins/P_q", "/p"] {
            let error = parse(&format!("defaultServiceAccount: {bad}")).unwrap_err();
            assert!(error.contains("NAMESPACE/NAME"), "{bad}: {error}");
        }
    }
}
