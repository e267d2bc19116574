//! What every handler gets: the server's shared state, the parsed resource path and the query.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::resources::Resource;

/// One request as the server received it (see [`Config::record_requests`](crate::Config::record_requests)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The HTTP method: `GET`, `PATCH`, ...
    pub method: String,
    /// The path exactly as sent, percent-encoding and all.
    pub path: String,
    /// The query string as sent, if any.
    pub query: Option<String>,
}

/// State shared by the handlers.
pub(crate) struct App {
    pub cluster: Arc<Cluster>,
    pub shutdown: CancellationToken,
    /// Who a request's credentials name; whether requests are authorized.
    pub auth: Arc<crate::auth::authn::Authenticator>,
    /// Every request received, when the server was configured to record them.
    pub requests: Option<Arc<std::sync::Mutex<Vec<RecordedRequest>>>>,
}

/// A parsed resource path.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub res: Arc<Resource>,
    /// Namespace from the path (empty when none).
    pub ns: String,
    pub name: Option<String>,
    pub sub: Option<String>,
    pub watch_prefix: bool,
}

/// The query parameters.
pub(crate) type Query = HashMap<String, String>;

/// Whether query parameter `key` is `true`.
pub(crate) fn is_true(query: &Query, key: &str) -> bool {
    query.get(key).is_some_and(|v| v == "true" || v == "1")
}
