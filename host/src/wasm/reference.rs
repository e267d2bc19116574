//! The object references a guest hands the host (kinds, namespaces, names, subresources), checked
//! before any grant check, cache lookup or URL: a guest is untrusted, and these strings would
//! otherwise choose the request path.
//!
//! # Rules
//! - `apiVersion`: `v1`-style version alone (the core group) or `group/version`; the group a
//!   DNS-1123 subdomain, the version a DNS-1035 label.
//! - `kind`: an ASCII letter, then letters and digits, at most 63 characters.
//! - namespace: a DNS-1123 label.
//! - name: a DNS-1123 subdomain; for kinds of `rbac.authorization.k8s.io` (whose names may read
//!   `system:controller:x`) a path segment name: at most 253 printable ASCII characters other
//!   than `/`, `%`, `?` and `#`, and never `.` or `..`. These are the API server's own name
//!   rules, so a refused reference is one the API server would have refused too.
//! - subresource: `status` or `scale`.
//!
//! Every failure is `call-error::invalid` naming the field, the value (shortened) and the rule.

use crate::runtime::KindRef;
use crate::wasm::bindings::CallError;
use label_selector::{is_dns_label, is_dns_subdomain};

/// The subresources a guest may write.
pub const SUBRESOURCES: [&str; 2] = ["status", "scale"];

/// The longest name the API server accepts.
const MAX_NAME: usize = 253;

/// The API group whose object names are path segments rather than DNS subdomains.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The longest piece of a refused value quoted back to the guest.
const QUOTED: usize = 64;

/// Checks a kind.
///
/// # Errors
/// `invalid`, naming the rule.
pub fn check_kind(kind: &KindRef) -> Result<(), CallError> {
    let version_ok = match kind.api_version.split_once('/') {
        Some((group, version)) => is_dns_subdomain(group) && is_dns_1035_label(version),
        None => is_dns_1035_label(&kind.api_version),
    };
    if !version_ok {
        return Err(invalid(
            "apiVersion",
            &kind.api_version,
            "must be `version` (the core group, e.g. `v1`) or `group/version` (e.g. `apps/v1`), \
             the group a lowercase DNS subdomain and the version a lowercase DNS label",
        ));
    }
    let bytes = kind.kind.as_bytes();
    let kind_ok = bytes.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.iter().all(u8::is_ascii_alphanumeric);
    if kind_ok {
        Ok(())
    } else {
        Err(invalid(
            "kind",
            &kind.kind,
            "must be a letter followed by letters and digits, at most 63 characters (e.g. \
             `ConfigMap`)",
        ))
    }
}

/// Checks a namespace (`None`: cluster-scoped).
///
/// # Errors
/// `invalid`, naming the rule.
pub fn check_namespace(namespace: Option<&str>) -> Result<(), CallError> {
    match namespace {
        Some(namespace) if !is_dns_label(namespace) => Err(invalid(
            "namespace",
            namespace,
            "must be a lowercase DNS-1123 label: at most 63 letters, digits and `-`, starting \
             and ending with a letter or digit",
        )),
        _ => Ok(()),
    }
}

/// Checks an object's name by the rules of its kind.
///
/// # Errors
/// `invalid`, naming the rule.
pub fn check_name(kind: &KindRef, name: &str) -> Result<(), CallError> {
    let group = kind
        .api_version
        .split_once('/')
        .map_or("", |(group, _)| group);
    if group == RBAC_GROUP {
        let segment_ok = !name.is_empty()
            && name.len() <= MAX_NAME
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b'%' | b'?' | b'#'));
        if segment_ok {
            return Ok(());
        }
        return Err(invalid(
            "name",
            name,
            "must be at most 253 printable characters other than `/`, `%`, `?` and `#`, and \
             not `.` or `..`",
        ));
    }
    if is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(invalid(
            "name",
            name,
            "must be a lowercase DNS-1123 subdomain: at most 253 letters, digits, `-` and `.`, \
             each dot-separated part starting and ending with a letter or digit",
        ))
    }
}

/// Checks a subresource.
///
/// # Errors
/// `invalid`, naming the ones allowed.
pub fn check_subresource(subresource: Option<&str>) -> Result<(), CallError> {
    match subresource {
        Some(sub) if !SUBRESOURCES.contains(&sub) => {
            Err(invalid("subresource", sub, "must be `status` or `scale`"))
        }
        _ => Ok(()),
    }
}

/// Checks every part of a reference: kind, namespace, name (empty only when `generate_name`
/// allows it) and subresource.
///
/// # Errors
/// `invalid` for the first part that breaks its rule.
pub fn check(
    kind: &KindRef,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
) -> Result<(), CallError> {
    check_kind(kind)?;
    check_namespace(namespace)?;
    check_name(kind, name)?;
    check_subresource(subresource)
}

/// Whether `text` is a DNS-1035 label: a lowercase letter, then letters, digits and `-`, not
/// ending in `-`, at most 63 characters (a version like `v1beta1`).
fn is_dns_1035_label(text: &str) -> bool {
    is_dns_label(text) && text.as_bytes()[0].is_ascii_lowercase()
}

/// `invalid`: the field, the value (escaped and shortened: it is the guest's) and the rule.
fn invalid(field: &str, value: &str, rule: &str) -> CallError {
    CallError::Invalid(format!(
        "the object reference's {field} {} {rule}",
        quote(value)
    ))
}

/// `value` as a quoted, escaped string of at most [`QUOTED`] characters, marked when cut.
#[must_use]
pub fn quote(value: &str) -> String {
    let shown: String = value.chars().take(QUOTED).collect();
    let mut quoted = format!("{shown:?}");
    if shown.len() < value.len() {
        quoted.push_str(&format!(" (first {QUOTED} of {} bytes)", value.len()));
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(api_version: &str, kind: &str) -> KindRef {
        KindRef::new(api_version, kind)
    }

    fn is_invalid(result: Result<(), CallError>, field: &str) -> bool {
        matches!(result, Err(CallError::Invalid(message)) if message.contains(field))
    }

    #[test]
    fn kinds_are_versions_and_group_versions_with_alphanumeric_names() {
        for (api_version, name) in [
            ("v1", "ConfigMap"),
            ("apps/v1", "Deployment"),
            ("example.com/v1alpha1", "Website"),
            ("events.k8s.io/v1", "Event"),
        ] {
            assert!(
                check_kind(&kind(api_version, name)).is_ok(),
                "{api_version}"
            );
        }
        for api_version in [
            "",
            "v1/",
            "/v1",
            "apps/v1/x",
            "V1",
            "1v",
            "apps/../v1",
            "a?b/v1",
            "apps/v1?watch=1",
            "apps/v 1",
        ] {
            assert!(
                is_invalid(check_kind(&kind(api_version, "Pod")), "apiVersion"),
                "{api_version:?}"
            );
        }
        for name in [
            "",
            "1Pod",
            "Pod/x",
            "Pod?",
            "Po d",
            "Pod%2F",
            &"P".repeat(64),
        ] {
            assert!(
                is_invalid(check_kind(&kind("v1", name)), "kind"),
                "{name:?}"
            );
        }
    }

    #[test]
    fn namespaces_are_dns_labels() {
        assert!(check_namespace(None).is_ok());
        assert!(check_namespace(Some("team-a")).is_ok());
        for namespace in [
            "",
            "hostile/secrets/stolen?x=",
            "a.b",
            "A",
            "-a",
            "a-",
            "..",
            "%2e%2e",
            &"a".repeat(64),
        ] {
            assert!(
                is_invalid(check_namespace(Some(namespace)), "namespace"),
                "{namespace:?}"
            );
        }
    }

    #[test]
    fn names_are_dns_subdomains_except_rbac_path_segments() {
        let cm = kind("v1", "ConfigMap");
        assert!(check_name(&cm, "shared-settings.v2").is_ok());
        for name in [
            "",
            ".",
            "..",
            "a/b",
            "?labelSelector=x",
            "a?watch=true",
            "a#b",
            "a%2Fb",
            "A",
            "a..b",
            "a b",
            "a\nb",
            &"a".repeat(254),
        ] {
            assert!(is_invalid(check_name(&cm, name), "name"), "{name:?}");
        }
        let role = kind("rbac.authorization.k8s.io/v1", "ClusterRole");
        assert!(check_name(&role, "system:controller:x").is_ok());
        for name in ["", ".", "..", "a/b", "a%b", "a?b", "a#b", "a b", "a\u{0}"] {
            assert!(is_invalid(check_name(&role, name), "name"), "{name:?}");
        }
    }

    #[test]
    fn subresources_come_from_a_closed_set() {
        assert!(check_subresource(None).is_ok());
        assert!(check_subresource(Some("status")).is_ok());
        assert!(check_subresource(Some("scale")).is_ok());
        for sub in ["", "exec", "status/../..", "status?x", "binding"] {
            assert!(
                is_invalid(check_subresource(Some(sub)), "subresource"),
                "{sub:?}"
            );
        }
    }

    #[test]
    fn refused_values_are_quoted_escaped_and_shortened() {
        let Err(CallError::Invalid(message)) = check_namespace(Some(&"x\n".repeat(1000))) else {
            panic!("refused");
        };
        assert!(!message.contains('\n'), "{message}");
        assert!(message.contains("(first 64 of 2000 bytes)"), "{message}");
        assert!(message.len() < 400, "{message}");
    }
}
