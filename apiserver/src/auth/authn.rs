//! Authentication: which user a request's bearer token names (the admin token, a ServiceAccount
//! token this server issued, a configured static user), anonymous without one, 401 for a token
//! nobody issued.

use axum::http::{HeaderMap, header};

use super::tokens::Tokens;
use super::{ANONYMOUS, AUTHENTICATED, MASTERS, UNAUTHENTICATED, UserInfo};
use crate::config::{Config, StaticUser};
use crate::error::ApiError;
use crate::store::Store;

/// The admin token when [`Config::require_token`] sets none: what the kubeconfig and the kube
/// client this server hands out carry.
pub const DEFAULT_ADMIN_TOKEN: &str = "embedded-apiserver";
/// The admin's user name (as the test control plane's token file names its admin).
pub const ADMIN_USER: &str = "admin";

/// Maps bearer tokens to users.
#[derive(Debug)]
pub struct Authenticator {
    admin_token: String,
    /// [`Config::require_token`] was set: requests without a known token are refused.
    token_required: bool,
    /// [`Config::authorization`]: anonymous requests are anonymous, unknown tokens refused.
    enforce: bool,
    users: Vec<StaticUser>,
    /// ServiceAccount tokens issued by TokenRequest.
    pub tokens: Tokens,
}

impl Authenticator {
    /// The authenticator `config` describes.
    pub fn new(config: &Config) -> Self {
        Authenticator {
            admin_token: config
                .token
                .clone()
                .unwrap_or_else(|| DEFAULT_ADMIN_TOKEN.into()),
            token_required: config.token.is_some(),
            enforce: config.authorization,
            users: config.users.clone(),
            tokens: Tokens::default(),
        }
    }

    /// Whether requests are authorized (else every request is allowed).
    pub fn enforces(&self) -> bool {
        self.enforce
    }

    /// The admin: `admin` in `system:masters`.
    pub fn admin() -> UserInfo {
        UserInfo {
            name: ADMIN_USER.into(),
            uid: String::new(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        }
    }

    /// The user `token` names, if any (what a TokenReview answers).
    pub fn user_for_token(&self, store: &Store, token: &str) -> Option<UserInfo> {
        if token == self.admin_token {
            return Some(Self::admin());
        }
        if let Some(user) = self.users.iter().find(|u| u.token == token) {
            let mut groups = user.groups.clone();
            if !groups.iter().any(|g| g == AUTHENTICATED) {
                groups.push(AUTHENTICATED.into());
            }
            return Some(UserInfo {
                name: user.name.clone(),
                uid: String::new(),
                groups,
            });
        }
        self.tokens.user(store, token)
    }

    /// The user a request authenticates as.
    ///
    /// With authorization on: a known bearer token's user, `system:anonymous` (in
    /// `system:unauthenticated`) without a token, 401 for an unknown token. With it off, as
    /// before: a required admin token must be sent (401 otherwise), and without one any
    /// credentials are the admin; issued and configured tokens still name their users.
    ///
    /// # Errors
    /// [`ApiError::Unauthorized`] for a token nobody issued (or a missing required one).
    pub fn authenticate(&self, store: &Store, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| token.trim())
                    .filter(|t| !t.is_empty())
            });
        let unauthorized = || ApiError::Unauthorized("Unauthorized".into());
        match token {
            Some(token) => match self.user_for_token(store, token) {
                Some(user) => Ok(user),
                None if self.enforce || self.token_required => Err(unauthorized()),
                None => Ok(Self::admin()),
            },
            None if self.enforce => Ok(UserInfo {
                name: ANONYMOUS.into(),
                uid: String::new(),
                groups: vec![UNAUTHENTICATED.into()],
            }),
            None if self.token_required => Err(unauthorized()),
            None => Ok(Self::admin()),
        }
    }
}
