//! Server configuration with chained setters.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

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
