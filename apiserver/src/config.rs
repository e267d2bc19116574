//! Server configuration with chained setters.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// A user a bearer token stands for, from [`Config::user`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaticUser {
    /// The bearer token.
    pub token: String,
    /// The user name.
    pub name: String,
    /// The groups (`system:authenticated` is added).
    pub groups: Vec<String>,
}

/// How to start an [`ApiServer`](crate::ApiServer).
///
/// ```
/// let config = embedded_apiserver::Config::default().history_limit(500);
/// assert_eq!(config.history_limit_value(), 500);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) http_addr: SocketAddr,
    pub(crate) https_addr: Option<SocketAddr>,
    pub(crate) history_limit: usize,
    pub(crate) watch_buffer: usize,
    pub(crate) bookmark_interval: Duration,
    pub(crate) default_namespaces: Vec<String>,
    pub(crate) token: Option<String>,
    pub(crate) record_requests: bool,
    pub(crate) authorization: bool,
    pub(crate) users: Vec<StaticUser>,
}

impl Default for Config {
    fn default() -> Self {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        Config {
            http_addr: loopback,
            https_addr: Some(loopback),
            history_limit: 10_000,
            watch_buffer: 16_384,
            bookmark_interval: Duration::from_secs(5),
            default_namespaces: vec![
                "default".into(),
                "kube-system".into(),
                "kube-public".into(),
                "kube-node-lease".into(),
            ],
            token: None,
            record_requests: false,
            authorization: false,
            users: Vec::new(),
        }
    }
}

impl Config {
    /// Address of the plain HTTP listener (default `127.0.0.1:0`, an ephemeral port).
    #[must_use]
    pub fn http_addr(mut self, addr: SocketAddr) -> Self {
        self.http_addr = addr;
        self
    }

    /// Address of the HTTPS listener (default `127.0.0.1:0`); `None` serves HTTP only.
    #[must_use]
    pub fn https_addr(mut self, addr: Option<SocketAddr>) -> Self {
        self.https_addr = addr;
        self
    }

    /// Require `Authorization: Bearer <token>` on every request; others get `401 Unauthorized`.
    /// The kubeconfig and the client the server hands out carry it. Default: any credentials,
    /// or none, are accepted.
    #[must_use]
    pub fn require_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Authenticate and authorize every request as kube-apiserver with `--authorization-mode=RBAC`
    /// does. Default: off (every request is allowed).
    ///
    /// On: the admin token ([`require_token`](Self::require_token), or `embedded-apiserver`, the
    /// one the kubeconfig and [`kube_client`](crate::ApiServer::kube_client) carry) is user
    /// `admin` in `system:masters`, allowed everything; a token from the TokenRequest
    /// subresource (`kubectl create token`) is its ServiceAccount
    /// (`system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
    /// `system:serviceaccounts:<ns>`, `system:authenticated`); a [`user`](Self::user) token is
    /// that user; no token is `system:anonymous`; any other token is `401 Unauthorized`.
    /// `Impersonate-User`/`-Group`/`-Uid` are checked as upstream checks them. Requests are
    /// allowed by RBAC rules read from the server's Roles, ClusterRoles and bindings at request
    /// time, else refused with upstream's `403 Forbidden`; the SubjectAccessReview APIs answer
    /// with the same rules. The server starts with upstream's `cluster-admin`,
    /// `system:discovery`, `system:basic-user` and `system:public-info-viewer` ClusterRoles and
    /// bindings (not the aggregated `admin`, `edit`, `view`).
    #[must_use]
    pub fn authorization(mut self, on: bool) -> Self {
        self.authorization = on;
        self
    }

    /// A static user: requests with bearer `token` authenticate as `name` in `groups` (and
    /// `system:authenticated`), like a line of kube-apiserver's `--token-auth-file`.
    #[must_use]
    pub fn user(
        mut self,
        token: impl Into<String>,
        name: impl Into<String>,
        groups: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.users.push(StaticUser {
            token: token.into(),
            name: name.into(),
            groups: groups.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// Keep every request received (method, path and query as sent) for
    /// [`ApiServer::requests`](crate::ApiServer::requests): for tests that assert what reached
    /// the server. Default: off (the log grows without bound).
    #[must_use]
    pub fn record_requests(mut self, record: bool) -> Self {
        self.record_requests = record;
        self
    }

    /// How many change events the watch history keeps (default 10,000). A watch or list from
    /// a resourceVersion older than the window gets `410 Gone`.
    #[must_use]
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history_limit = events.max(1);
        self
    }

    /// The configured history window, in events.
    pub fn history_limit_value(&self) -> usize {
        self.history_limit
    }

    /// How many events a slow watcher may fall behind before its watch is closed (default
    /// 16,384); the client then re-watches from its last version.
    #[must_use]
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events.max(16);
        self
    }

    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (default 5 s).
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }
}
