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
}

impl Grant {
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
