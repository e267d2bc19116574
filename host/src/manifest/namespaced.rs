//! `NamespacedReconcilerPlugin`: a plugin a team declares in its own namespace. Same spec as the
//! cluster-scoped `ReconcilerPlugin` (one type, one schema), held to its namespace: it watches
//! only there, its grants reach only there, it acts as a ServiceAccount of that namespace
//! (`serviceAccountName`, default `default`, as a Pod), and a ConfigMap module comes from there.
//! A spec reaching elsewhere is refused naming the field.
//!
//! The name follows the precedent of a namespaced kind added beside an existing cluster-scoped
//! one without renaming it (Gardener's `CloudProfile` and `NamespacedCloudProfile`): objects and
//! scripts written for `ReconcilerPlugin` keep working.
//!
//! The host runs such an object as the plugin `<namespace>.<name>` (neither part can hold a
//! dot), through the same pipeline as a `ReconcilerPlugin`: [`as_cluster_object`] gives that
//! form, marked with [`NAMESPACE_ANNOTATION`].

use std::borrow::Cow;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::raw::{RawManifest, ReconcilerPlugin};
use super::status::ReconcilerPluginStatus;
use super::values::{Problem, problem};

/// The kind's name.
pub const KIND: &str = "NamespacedReconcilerPlugin";
/// Marks the cluster form of a namespaced object with the object's namespace.
pub const NAMESPACE_ANNOTATION: &str = "reconcile-host.dev/namespace";
/// The account a namespaced plugin naming none acts as: its namespace's `default`.
const DEFAULT_ACCOUNT: &str = "default";

/// A `NamespacedReconcilerPlugin` object.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct NamespacedReconcilerPlugin {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// What it declares (a `ReconcilerPlugin`'s spec).
    pub spec: RawManifest,
    /// Written by the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReconcilerPluginStatus>,
}

impl kube::Resource for NamespacedReconcilerPlugin {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        KIND.into()
    }
    fn group((): &()) -> Cow<'_, str> {
        "reconcile-host.dev".into()
    }
    fn version((): &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural((): &()) -> Cow<'_, str> {
        "namespacedreconcilerplugins".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The CRD: `ReconcilerPlugin`'s, namespaced and renamed.
#[must_use]
pub fn crd() -> CustomResourceDefinition {
    let mut crd = ReconcilerPlugin::crd();
    crd.metadata.name = Some("namespacedreconcilerplugins.reconcile-host.dev".to_owned());
    crd.spec.scope = "Namespaced".to_owned();
    let names = &mut crd.spec.names;
    names.kind = KIND.to_owned();
    names.plural = "namespacedreconcilerplugins".to_owned();
    names.singular = Some("namespacedreconcilerplugin".to_owned());
    names.short_names = Some(vec!["nsplugin".to_owned()]);
    crd
}

/// The plugin name of the object `name` in `namespace`.
#[must_use]
pub fn plugin_name(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// The namespace and name of the namespaced object whose plugin is `plugin` (`None`: a
/// `ReconcilerPlugin`'s, whose names hold no dot).
#[must_use]
pub fn object_of(plugin: &str) -> Option<(&str, &str)> {
    plugin.split_once('.')
}

/// The object as the `ReconcilerPlugin` the host runs: named `<namespace>.<name>`, marked with
/// its namespace.
#[must_use]
pub fn as_cluster_object(object: NamespacedReconcilerPlugin) -> ReconcilerPlugin {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let mut metadata = object.metadata;
    metadata.name = Some(plugin_name(&namespace, &name));
    metadata.namespace = None;
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(NAMESPACE_ANNOTATION.to_owned(), namespace);
    ReconcilerPlugin {
        metadata,
        spec: object.spec,
        status: object.status,
    }
}

/// The spec the host runs for `object`: a namespaced object's held to its namespace.
///
/// # Errors
/// For a namespaced object reaching out of its namespace: the field and the fix.
pub fn confined_spec(object: &ReconcilerPlugin) -> Result<RawManifest, String> {
    let mut spec = object.spec.clone();
    let namespace = (object.metadata.annotations.as_ref())
        .and_then(|annotations| annotations.get(NAMESPACE_ANNOTATION));
    if let Some(namespace) = namespace {
        confine(&mut spec, namespace)
            .map_err(|Problem { field, problem }| format!("`{field}`: {problem}"))?;
    }
    Ok(spec)
}

/// Holds `spec` to `namespace`: fills what it leaves out with the namespace, refuses what
/// reaches elsewhere.
///
/// # Errors
/// The field reaching out of `namespace`, and the fix.
pub(super) fn confine(spec: &mut RawManifest, namespace: &str) -> Result<(), Problem> {
    let elsewhere = |field: String, value: &str| {
        problem(
            field,
            format!(
                "`{value}` is outside the plugin's namespace `{namespace}`; a \
                 {KIND} reaches only its own namespace: remove it or write `{namespace}` (a \
                 ReconcilerPlugin, which the platform's administrators create, may reach others)"
            ),
        )
    };
    match spec.namespace.as_deref() {
        Some(own) if own != namespace => return Err(elsewhere("spec.namespace".into(), own)),
        _ => spec.namespace = Some(namespace.to_owned()),
    }
    match spec.service_account_namespace.as_deref() {
        Some(own) if own != namespace => {
            return Err(elsewhere("spec.serviceAccountNamespace".into(), own));
        }
        _ => spec.service_account_namespace = Some(namespace.to_owned()),
    }
    if spec.service_account_name.is_none() {
        spec.service_account_name = Some(DEFAULT_ACCOUNT.to_owned());
    }
    if let Some(source) = &spec.config_map
        && source.namespace != namespace
    {
        return Err(elsewhere(
            "spec.configMap.namespace".into(),
            &source.namespace,
        ));
    }
    for (i, grant) in spec.grants.iter_mut().flatten().enumerate() {
        match &grant.namespaces {
            None => grant.namespaces = Some(vec![namespace.to_owned()]),
            Some(listed) => {
                if let Some(other) = listed.iter().find(|n| *n != namespace) {
                    return Err(elsewhere(format!("spec.grants[{i}].namespaces"), other));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> RawManifest {
        serde_yaml_ng::from_str(yaml).expect("spec")
    }

    #[test]
    fn what_a_spec_leaves_out_is_its_namespace_and_its_default_account() {
        let mut raw = spec(
            "for: {apiVersion: v1, kind: ConfigMap}\noci: r.example/p@sha256:00\ngrants:\n- \
             {apiVersion: v1, kind: ConfigMap, verbs: [get]}\n",
        );
        confine(&mut raw, "team-a").unwrap();
        assert_eq!(raw.namespace.as_deref(), Some("team-a"));
        assert_eq!(raw.service_account_name.as_deref(), Some("default"));
        assert_eq!(raw.service_account_namespace.as_deref(), Some("team-a"));
        let grants = raw.grants.unwrap();
        assert_eq!(
            grants[0].namespaces.as_deref(),
            Some(&["team-a".to_owned()][..])
        );
    }

    #[test]
    fn a_spec_reaching_another_namespace_is_refused_naming_the_field() {
        for (yaml, field) in [
            ("namespace: team-b\n", "spec.namespace"),
            (
                "serviceAccountName: x\nserviceAccountNamespace: team-b\n",
                "spec.serviceAccountNamespace",
            ),
            (
                "configMap: {namespace: team-b, name: m, key: k}\n",
                "spec.configMap.namespace",
            ),
            (
                "grants:\n- {apiVersion: v1, kind: Secret, verbs: [get], namespaces: [team-a, team-b]}\n",
                "spec.grants[0].namespaces",
            ),
            (
                "grants:\n- {apiVersion: v1, kind: Secret, verbs: [get], namespaces: [\"*\"]}\n",
                "spec.grants[0].namespaces",
            ),
        ] {
            let mut raw = spec(&format!("for: {{apiVersion: v1, kind: ConfigMap}}\n{yaml}"));
            let refused = confine(&mut raw, "team-a").unwrap_err();
            assert_eq!(refused.field, field, "{yaml}");
            assert!(refused.problem.contains("team-a"), "{}", refused.problem);
        }
    }

    #[test]
    fn the_crd_is_the_cluster_kinds_namespaced() {
        let crd = crd();
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.kind, KIND);
        let cluster = ReconcilerPlugin::crd();
        assert_eq!(
            serde_json::to_value(&crd.spec.versions).unwrap(),
            serde_json::to_value(&cluster.spec.versions).unwrap()
        );
    }
}
