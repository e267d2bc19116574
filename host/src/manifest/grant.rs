//! Grants: the kinds, verbs, namespaces and subresources a plugin's `client` import may use, and
//! the refusal that says what is missing.

use std::fmt;

use super::values::describe;
use crate::runtime::KindRef;

/// The verbs as a manifest lists them, for messages.
pub(super) const VERBS: &str = "get, create, update, patch or delete";

/// A Kubernetes verb a grant can give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// Read one object from the API server.
    Get,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Patch an object, including server-side apply.
    Patch,
    /// Delete an object.
    Delete,
}

impl Verb {
    /// Every verb, in the order they are listed in messages.
    pub const ALL: [Self; 5] = [
        Self::Get,
        Self::Create,
        Self::Update,
        Self::Patch,
        Self::Delete,
    ];

    /// The lowercase Kubernetes verb, e.g. `patch`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `grants:`: verbs allowed on a kind, in some namespaces, on some subresources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The kind.
    pub kind: KindRef,
    /// Allowed verbs, non-empty and without duplicates.
    pub verbs: Vec<Verb>,
    /// Allowed namespaces; `None` for every namespace and cluster-wide calls.
    pub namespaces: Option<Vec<String>>,
    /// Subresources (e.g. `status`) that may be written besides the object itself.
    pub subresources: Vec<String>,
    /// The kind's resource as the manifest writes it (`resource:`); `None`: Kubernetes' guess
    /// from the kind ([`guessed_resource`]).
    pub resource: Option<String>,
}

/// The resource Kubernetes guesses for a kind (apimachinery's `UnsafeGuessKindToResource`):
/// lowercase; kept as is when it ends in `endpoints`, `es` added after a final `s`, a final `y`
/// made `ies`, else `s` added. The admission policy in `deploy/base/plugin-admission.yaml`
/// computes the same in CEL, so the two must change together.
#[must_use]
pub fn guessed_resource(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with("endpoints") {
        lower
    } else if lower.ends_with('s') {
        lower + "es"
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        lower + "s"
    }
}

impl Grant {
    /// The resource the admission policy checks the requester holds for this grant: the one
    /// the manifest writes, else Kubernetes' guess from the kind. A call is made only when it
    /// is the resource the API server serves the kind as.
    #[must_use]
    pub fn resource(&self) -> std::borrow::Cow<'_, str> {
        match &self.resource {
            Some(written) => written.as_str().into(),
            None => guessed_resource(&self.kind.kind).into(),
        }
    }

    /// Whether this grant alone allows the call; allocation-free.
    #[must_use]
    pub fn covers(
        &self,
        kind: &KindRef,
        verb: Verb,
        namespace: Option<&str>,
        subresource: Option<&str>,
    ) -> bool {
        self.kind == *kind
            && self.verbs.contains(&verb)
            && self.covers_namespace(namespace)
            && subresource.is_none_or(|wanted| self.subresources.iter().any(|s| s == wanted))
    }

    pub(super) fn covers_namespace(&self, namespace: Option<&str>) -> bool {
        match (&self.namespaces, namespace) {
            (None, _) => true,
            (Some(listed), Some(wanted)) => listed.iter().any(|n| n == wanted),
            (Some(_), None) => false,
        }
    }
}

/// A guest call that no grant allows. Its message names the plugin, the call and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The plugin's name.
    pub plugin: Box<str>,
    /// The kind called on.
    pub kind: KindRef,
    /// The verb.
    pub verb: Verb,
    /// The namespace; `None` for a cluster-wide call.
    pub namespace: Option<Box<str>>,
    /// The subresource, if the call was to one.
    pub subresource: Option<Box<str>>,
    /// What the closest grant lacks.
    pub missing: Missing,
}

/// What stands between a denied call and a grant that would allow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// No grant names the kind.
    Kind,
    /// Grants name the kind but none gives the verb.
    Verb,
    /// Grants give the verb on the kind but not in this namespace.
    Namespace,
    /// Grants allow the call on the object but not on this subresource.
    Subresource,
}

impl std::error::Error for Denied {}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = describe(&self.kind);
        write!(
            f,
            "plugin `{}` has no grant to `{}` ",
            self.plugin, self.verb
        )?;
        if let Some(subresource) = &self.subresource {
            write!(f, "the `{subresource}` subresource of ")?;
        }
        match &self.namespace {
            Some(namespace) => write!(f, "{kind} in namespace `{namespace}`; ")?,
            None => write!(f, "{kind} cluster-wide; ")?,
        }
        let grant = format!("its grant for {kind} under `grants:` in its manifest");
        match (self.missing, &self.namespace, &self.subresource) {
            (Missing::Kind, ..) => {
                f.write_str("add a grant for it under `grants:` in its manifest")
            }
            (Missing::Verb, ..) => write!(f, "add `{}` to the `verbs` of {grant}", self.verb),
            (Missing::Namespace, Some(namespace), _) => write!(
                f,
                "add `{namespace}` to the `namespaces` of {grant}, or remove `namespaces` to \
                 allow every namespace"
            ),
            (Missing::Namespace, None, _) => write!(
                f,
                "remove `namespaces` from {grant} (or write [\"*\"]) to allow cluster-wide calls"
            ),
            (Missing::Subresource, _, subresource) => write!(
                f,
                "add `{}` to the `subresources` of {grant}",
                subresource.as_deref().unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::guessed_resource;

    #[test]
    fn guessed_resource_follows_kubernetes_guess() {
        for (kind, resource) in [
            ("ConfigMap", "configmaps"),
            ("Ingress", "ingresses"),
            ("NetworkPolicy", "networkpolicies"),
            ("Endpoints", "endpoints"),
            ("Gateway", "gatewaies"),
            ("Octopus", "octopuses"),
        ] {
            assert_eq!(guessed_resource(kind), resource, "{kind}");
        }
    }
}
