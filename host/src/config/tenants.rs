//! The `tenants:` section of the host's configuration: ceilings shared by all the plugins of one
//! tenant, so that one team's plugins cannot take another team's share of the API server, of the
//! host's cores or of its memory.
//!
//! A plugin's tenant is the namespace of the ServiceAccount it acts as: for a
//! `NamespacedReconcilerPlugin`, its own namespace. A plugin acting as the host belongs to no
//! tenant and is held only by its own limits.
//!
//! ```yaml
//! tenants:
//!   default:              # every tenant's ceilings, unless its namespace has its own
//!     apiQps: 100         # API requests per second across the tenant's plugins
//!     apiBurst: 200       # ... and at once
//!     instances: 16       # guest calls running at once
//!     memory: 1Gi         # linear memory of the tenant's instances, kept ones included
//!   namespaces:
//!     team-a: {instances: 2, memory: 256Mi}   # fields left out come from `default`
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::quantity;

/// Every tenant's ceilings when the configuration gives none: what one plugin may ask for at
/// most (`pluginClient.maxQps` and `maxBurst` by default), 16 calls at once and 1Gi of memory
/// (16 instances at the default 64Mi each).
const DEFAULT: TenantCeilings = TenantCeilings {
    api_qps: 100.0,
    api_burst: 200,
    instances: 16,
    memory: 1 << 30,
};

/// One tenant's ceilings, resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TenantCeilings {
    /// API requests per second, on average, across the tenant's plugins.
    pub api_qps: f64,
    /// API requests at once after an idle period.
    pub api_burst: u32,
    /// Guest calls (reconciles, shadow runs) running at once.
    pub instances: u32,
    /// Bytes of linear memory the tenant's instances hold together, kept instances included.
    pub memory: u64,
}

/// Ceilings as written: each field left out comes from the level above.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CeilingsSettings {
    /// `apiQps`.
    pub api_qps: Option<f64>,
    /// `apiBurst`.
    pub api_burst: Option<u32>,
    /// `instances`.
    pub instances: Option<u32>,
    /// `memory`, a Kubernetes quantity (`512Mi`).
    pub memory: Option<String>,
}

/// `tenants:` settings.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TenantsConfig {
    /// Every tenant's ceilings.
    pub default: CeilingsSettings,
    /// Ceilings of particular tenants, by namespace.
    pub namespaces: BTreeMap<String, CeilingsSettings>,
}

impl CeilingsSettings {
    /// These settings over `base`; the first invalid field (its name under `at`) with the fix.
    fn over(&self, base: TenantCeilings, at: &str) -> Result<TenantCeilings, (String, String)> {
        let field = |name: &str| format!("{at}.{name}");
        let mut resolved = base;
        if let Some(qps) = self.api_qps {
            if !(qps.is_finite() && qps > 0.0) {
                return Err((
                    field("apiQps"),
                    format!("must be a positive number of requests per second, got {qps}"),
                ));
            }
            resolved.api_qps = qps;
        }
        for (name, value, target) in [
            ("apiBurst", self.api_burst, &mut resolved.api_burst),
            ("instances", self.instances, &mut resolved.instances),
        ] {
            if let Some(value) = value {
                if value == 0 {
                    return Err((field(name), "must be at least 1".into()));
                }
                *target = value;
            }
        }
        if let Some(text) = &self.memory {
            let bytes = quantity(text).map_err(|problem| (field("memory"), problem))?;
            if bytes < 1 << 20 {
                return Err((
                    field("memory"),
                    format!("`{text}` is below 1Mi, less than one instance needs; raise it"),
                ));
            }
            resolved.memory = bytes;
        }
        Ok(resolved)
    }
}

impl TenantsConfig {
    /// The ceilings of the tenant `namespace`. Call [`validate`](Self::validate) first: a field
    /// it would refuse is left at its default here.
    #[must_use]
    pub fn ceilings(&self, namespace: &str) -> TenantCeilings {
        let base = self
            .default
            .over(DEFAULT, "tenants.default")
            .unwrap_or(DEFAULT);
        match self.namespaces.get(namespace) {
            Some(own) => own.over(base, "tenants.namespaces").unwrap_or(base),
            None => base,
        }
    }

    /// Checks every value.
    ///
    /// # Errors
    /// The first invalid field, as written in the file, and what is wrong with it.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let base = self.default.over(DEFAULT, "tenants.default")?;
        for (namespace, own) in &self.namespaces {
            let at = format!("tenants.namespaces.{namespace}");
            if !label_selector::is_dns_label(namespace) {
                return Err((
                    at,
                    format!(
                        "`{namespace}` is not a namespace name; use lowercase letters, digits and `-`"
                    ),
                ));
            }
            own.over(base, &at)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TenantsConfig {
        serde_yaml_ng::from_str(text).expect("the section parses")
    }

    #[test]
    fn a_namespace_takes_its_own_fields_and_the_default_for_the_rest() {
        let config = parse(
            "default: {apiQps: 20, instances: 4}\n\
             namespaces:\n  team-a: {instances: 1, memory: 64Mi}\n",
        );
        config.validate().expect("valid");
        assert_eq!(
            config.ceilings("team-a"),
            TenantCeilings {
                api_qps: 20.0,
                api_burst: DEFAULT.api_burst,
                instances: 1,
                memory: 64 << 20,
            }
        );
        assert_eq!(
            config.ceilings("team-b"),
            TenantCeilings {
                api_qps: 20.0,
                instances: 4,
                ..DEFAULT
            }
        );
        assert_eq!(TenantsConfig::default().ceilings("any"), DEFAULT);
    }

    #[test]
    fn values_that_cannot_work_are_refused_with_their_field() {
        for (text, field, says) in [
            ("default: {apiQps: 0}", "tenants.default.apiQps", "positive"),
            (
                "default: {instances: 0}",
                "tenants.default.instances",
                "at least 1",
            ),
            (
                "namespaces: {team-a: {apiBurst: 0}}",
                "tenants.namespaces.team-a.apiBurst",
                "at least 1",
            ),
            (
                "namespaces: {team-a: {memory: lots}}",
                "tenants.namespaces.team-a.memory",
                "64Mi",
            ),
            (
                "default: {memory: 1Ki}",
                "tenants.default.memory",
                "below 1Mi",
            ),
            (
                "namespaces: {Team_A: {}}",
                "tenants.namespaces.Team_A",
                "namespace name",
            ),
        ] {
            let (got, problem) = parse(text).validate().expect_err(text);
            assert_eq!(got, field, "{text}");
            assert!(problem.contains(says), "{text}: {problem}");
        }
        let unknown = serde_yaml_ng::from_str::<TenantsConfig>("default: {qps: 3}")
            .expect_err("an unknown field");
        assert!(unknown.to_string().contains("qps"), "{unknown}");
    }
}
