//! `serviceAccountName`: the ServiceAccount a plugin acts as, and the user name the host
//! impersonates for it.

use label_selector::is_dns_subdomain;

pub use crate::config::ServiceAccountRef;

use super::values::{Problem, label_problem, problem};

/// The ServiceAccount `serviceAccountName` and `serviceAccountNamespace` name (the latter
/// defaulting to the plugin's `namespace`).
pub(super) fn service_account(
    name: Option<String>,
    namespace: Option<String>,
    watched: Option<&str>,
) -> Result<Option<ServiceAccountRef>, Problem> {
    let Some(name) = name else {
        if namespace.is_some() {
            return Err(problem(
                "serviceAccountNamespace",
                "is set without serviceAccountName; add `serviceAccountName: <name>` or remove \
                 it",
            ));
        }
        return Ok(None);
    };
    if !is_dns_subdomain(&name) {
        return Err(problem(
            "serviceAccountName",
            format!(
                "`{name}` is not a ServiceAccount name (a DNS-1123 subdomain: lowercase letters, \
                 digits, `-` and `.`)"
            ),
        ));
    }
    let Some(namespace) = namespace.or_else(|| watched.map(ToOwned::to_owned)) else {
        return Err(problem(
            "serviceAccountNamespace",
            format!(
                "missing; add the namespace of ServiceAccount `{name}`, e.g. \
                 `serviceAccountNamespace: plugins` (it defaults to `namespace` only when the \
                 plugin watches one namespace)"
            ),
        ));
    };
    if let Some(why) = label_problem("namespace name", &namespace) {
        return Err(problem("serviceAccountNamespace", why));
    }
    Ok(Some(ServiceAccountRef { namespace, name }))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::manifest::{Manifest, ManifestError};

    fn parse(extra: &str) -> Result<Manifest, ManifestError> {
        let base = "name: p\nmodule: p.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n";
        Manifest::parse(&format!("{base}{extra}"), Path::new("/tmp"))
    }

    fn refusal(extra: &str) -> (String, String) {
        match parse(extra) {
            Err(ManifestError::Invalid { field, problem, .. }) => (field, problem),
            other => panic!("{extra}: {other:?}"),
        }
    }

    #[test]
    fn the_account_namespace_defaults_to_the_watched_namespace() {
        let manifest = parse("namespace: team-a\nserviceAccountName: site\n").unwrap();
        let account = manifest.service_account.unwrap();
        assert_eq!(account.user(), "system:serviceaccount:team-a:site");
        assert_eq!(parse("").unwrap().service_account, None);
    }

    #[test]
    fn an_account_without_a_namespace_or_with_a_bad_name_is_refused_naming_the_fix() {
        let (field, problem) = refusal("serviceAccountName: site\n");
        assert_eq!(field, "serviceAccountNamespace");
        assert!(problem.contains("serviceAccountNamespace: "), "{problem}");
        let (field, problem) = refusal("serviceAccountName: Site\nnamespace: a\n");
        assert_eq!(field, "serviceAccountName");
        assert!(problem.contains("DNS-1123"), "{problem}");
        let (field, _) = refusal("serviceAccountNamespace: a\n");
        assert_eq!(field, "serviceAccountNamespace");
        let (field, _) = refusal("serviceAccountName: s\nserviceAccountNamespace: A_b\n");
        assert_eq!(field, "serviceAccountNamespace");
    }
}
