//! Reads authorized per ServiceAccount: whether a plugin's account may `get` or `list` a
//! resource in a namespace. The informers are shared by every plugin, so the API server never
//! sees a plugin's cached reads; the host asks it instead (a SubjectAccessReview, sent with the
//! host's own identity) and keeps each answer for a short time.
//!
//! # Guarantees
//! - A read is answered only when the API server said, at most [`DECISION_TTL`] ago, that the
//!   account may do it; a Role or binding added or removed takes effect within that time.
//! - When no answer can be had (an error, a timeout, a refusal to review), the read is refused:
//!   the error names why.
//! - The review names the user and the groups the API server gives an impersonated
//!   ServiceAccount (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`,
//!   `system:authenticated`), so it decides as it would for the account's own request.
//! - At most [`CAPACITY`] decisions are kept; expired ones go first.

mod decisions;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::manifest::ServiceAccountRef;
use decisions::{Decisions, Question};

/// How long an answer is kept.
pub const DECISION_TTL: Duration = Duration::from_secs(5);
/// How many answers are kept.
pub const CAPACITY: usize = 16_384;
/// How long a review may take before the read is refused.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// A read to authorize: the verb (`get` or `list`), the resource and the namespace (`None`:
/// cluster-wide, or a cluster-scoped resource).
#[derive(Clone, Copy, Debug)]
pub struct Read<'a> {
    /// `get` or `list`.
    pub verb: &'static str,
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The resource (plural), e.g. `configmaps`.
    pub resource: &'a str,
    /// The namespace; `None` for every namespace or a cluster-scoped resource.
    pub namespace: Option<&'a str>,
    /// The object's name (a `get`); `None` for a list.
    pub name: Option<&'a str>,
}

/// Asks the API server whether accounts may read, and remembers its answers.
pub struct ReadAuthorizer {
    reviews: Api<SubjectAccessReview>,
    decisions: Decisions,
}

impl std::fmt::Debug for ReadAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAuthorizer").finish_non_exhaustive()
    }
}

impl ReadAuthorizer {
    /// Reviews sent through `client` (the host's own identity: it needs `create` on
    /// `subjectaccessreviews.authorization.k8s.io`).
    #[must_use]
    pub fn new(client: kube::Client) -> Arc<Self> {
        Self::with_ttl(client, DECISION_TTL)
    }

    /// As [`new`](Self::new), keeping answers for `ttl`.
    #[must_use]
    pub fn with_ttl(client: kube::Client, ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            reviews: Api::all(client),
            decisions: Decisions::new(ttl, CAPACITY),
        })
    }

    /// Whether `account` may do `read`.
    ///
    /// # Errors
    /// Why the API server gave no answer; the caller refuses the read.
    pub async fn allowed(
        &self,
        account: &ServiceAccountRef,
        read: Read<'_>,
    ) -> Result<bool, String> {
        let question = Question::new(account, read);
        if let Some(allowed) = self.decisions.get(&question) {
            return Ok(allowed);
        }
        let allowed = self.review(account, read).await?;
        self.decisions.put(question, allowed);
        Ok(allowed)
    }

    /// The API server's answer, unremembered.
    async fn review(&self, account: &ServiceAccountRef, read: Read<'_>) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(account.user()),
                groups: Some(vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{}", account.namespace),
                    "system:authenticated".to_owned(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(read.verb.to_owned()),
                    group: Some(read.group.to_owned()),
                    resource: Some(read.resource.to_owned()),
                    namespace: read.namespace.map(ToOwned::to_owned),
                    name: read.name.map(ToOwned::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let params = PostParams::default();
        let sent = self.reviews.create(&params, &review);
        let answer = tokio::time::timeout(REVIEW_TIMEOUT, sent)
            .await
            .map_err(|_| {
                format!(
                    "the API server did not answer a SubjectAccessReview within {REVIEW_TIMEOUT:?}"
                )
            })?
            .map_err(|error| {
                format!(
                    "the API server refused a SubjectAccessReview ({}); grant the host `create` \
                     on subjectaccessreviews.authorization.k8s.io (reconcile-host rbac \
                     --include-host)",
                    crate::error_chain(&error)
                )
            })?;
        Ok(answer.status.is_some_and(|status| status.allowed))
    }

    /// How many answers are kept now (for tests and metrics).
    #[must_use]
    pub fn kept(&self) -> usize {
        self.decisions.len()
    }
}
