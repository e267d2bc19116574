//! Who may read the telemetry port: with `telemetry.authorization: kubernetes`, every path but
//! `/healthz` and `/readyz` needs `Authorization: Bearer <token>` (or, through the API server's
//! proxy, [`FORWARDED_AUTHORIZATION`]); the API server authenticates
//! the token (TokenReview) and authorizes the user for the request's path and verb
//! (SubjectAccessReview with `nonResourceAttributes`, as `kubectl get --raw` is checked), the way
//! controller-runtime's `WithAuthenticationAndAuthorization` filter does. No token or a token
//! the API server does not accept is `401`; a user without the right is `403`; a review that
//! cannot be made is `503`, so a broken check never opens the port.
//!
//! Answers are kept for a short while per (token, path, verb), so a scraper every 15 s costs
//! the API server two requests a minute at most, and a revoked right stops working within
//! [`ALLOWED_FOR`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// How long an allowed request's answer is kept.
pub const ALLOWED_FOR: Duration = Duration::from_secs(60);
/// How long a refusal is kept (a right just granted works soon).
pub const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Answers kept at most; when full, the table starts again.
const MAX_ENTRIES: usize = 4096;

/// Paths served to anyone: the kubelet's probes carry no token.
pub fn is_open(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// What the API server said of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    Allowed,
    /// 401, with why.
    Unauthenticated(String),
    /// 403, with why.
    Forbidden(String),
}

/// Answers kept: by the digest of (token, path, verb), the verdict and until when it holds.
type Answers = HashMap<[u8; 32], (Verdict, Instant)>;

/// The checks of the secured telemetry port.
#[derive(Clone)]
pub struct Access {
    client: kube::Client,
    answers: Arc<Mutex<Answers>>,
}

impl Access {
    /// Checks made with `client` (the host's own: it needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`, which `reconcile-host rbac` and deploy/base grant).
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            answers: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    async fn verdict(&self, token: &str, path: &str, verb: &str) -> Result<Verdict, kube::Error> {
        let key: [u8; 32] = Sha256::new()
            .chain_update(token)
            .chain_update([0])
            .chain_update(path)
            .chain_update([0])
            .chain_update(verb)
            .finalize()
            .into();
        if let Some((verdict, until)) = self.answers.lock().get(&key)
            && Instant::now() < *until
        {
            return Ok(verdict.clone());
        }
        let verdict = self.review(token, path, verb).await?;
        let keep = if verdict == Verdict::Allowed {
            ALLOWED_FOR
        } else {
            REFUSED_FOR
        };
        let mut answers = self.answers.lock();
        if answers.len() >= MAX_ENTRIES {
            answers.clear();
        }
        answers.insert(key, (verdict.clone(), Instant::now() + keep));
        Ok(verdict)
    }

    async fn review(&self, token: &str, path: &str, verb: &str) -> Result<Verdict, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => {
                let why = status
                    .error
                    .unwrap_or_else(|| "the API server does not accept the token".to_owned());
                return Ok(Verdict::Unauthenticated(why));
            }
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        let status = decided.status.unwrap_or_default();
        if status.allowed {
            return Ok(Verdict::Allowed);
        }
        let who = user.username.unwrap_or_default();
        let reason = status.reason.filter(|r| !r.is_empty());
        Ok(Verdict::Forbidden(format!(
            "user {who:?} may not {verb} {path}{}: grant it `nonResourceURLs: [\"{path}\"]`, \
             `verbs: [\"{verb}\"]` in a ClusterRole",
            reason.map(|r| format!(" ({r})")).unwrap_or_default()
        )))
    }
}

/// Where a token rides through the API server's proxy (`kubectl reconcile`): the API server
/// drops `Authorization` once it has authenticated the request, and passes this header on. It
/// is checked exactly as `Authorization` is.
pub const FORWARDED_AUTHORIZATION: &str = "x-reconcile-authorization";

/// The bearer token of `headers` (`Authorization`, else [`FORWARDED_AUTHORIZATION`]), if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(header::AUTHORIZATION)
        .or_else(|| headers.get(FORWARDED_AUTHORIZATION))?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn refuse(status: StatusCode, why: &str) -> Response {
    let mut response = (status, format!("{why}\n")).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// The middleware: open paths pass; the rest need a token the API server accepts and a right.
pub async fn guard(State(access): State<Access>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    if is_open(&path) {
        return next.run(request).await;
    }
    let Some(token) = bearer(request.headers()) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "give a bearer token the API server accepts (Authorization: Bearer <token>), e.g. a \
             ServiceAccount's from `kubectl create token`",
        );
    };
    let verb = request.method().as_str().to_ascii_lowercase();
    match access.verdict(token, &path, &verb).await {
        Ok(Verdict::Allowed) => next.run(request).await,
        Ok(Verdict::Unauthenticated(why)) => refuse(StatusCode::UNAUTHORIZED, &why),
        Ok(Verdict::Forbidden(why)) => refuse(StatusCode::FORBIDDEN, &why),
        Err(error) => {
            tracing::warn!(%error, path, "cannot review a telemetry request with the API server");
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("cannot check the request with the API server: {error}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_token_is_taken() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert_eq!(bearer(&with("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&with("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&with("Basic abc")), None);
        assert_eq!(bearer(&with("Bearer ")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
        let mut forwarded = HeaderMap::new();
        forwarded.insert(FORWARDED_AUTHORIZATION, "Bearer fwd".parse().unwrap());
        assert_eq!(bearer(&forwarded), Some("fwd"));
        forwarded.insert(header::AUTHORIZATION, "Bearer direct".parse().unwrap());
        assert_eq!(bearer(&forwarded), Some("direct"), "Authorization first");
    }

    #[test]
    fn only_the_probes_are_open() {
        assert!(is_open("/healthz") && is_open("/readyz"));
        for path in [
            "/metrics",
            "/debug/recordings",
            "/healthz/x",
            "/",
            "/readyz/../metrics",
        ] {
            assert!(!is_open(path), "{path}");
        }
    }
}
