//! The host's kube-rs client: client-side rate limiting (qps/burst), `Retry-After`, and bounded
//! retries with backoff (SEMANTICS rule 23).
//!
//! # Flow
//! [`client`] builds kube's default stack from a [`kube::Config`] and adds two tower layers on
//! top of it with `ClientBuilder::with_layer`. Outermost first, a request goes through:
//!
//! 1. `kube::Client`'s own `Buffer` (what makes the client cheap to clone; one service for all
//!    clones, hence one token bucket);
//! 2. [`RetryLayer`]: classifies the request, buffers its body, and repeats failed attempts;
//! 3. [`RateLimitLayer`]: every attempt waits for a token of the shared bucket;
//! 4. kube's stack: tracing, extra headers, auth, base URI, and the hyper client.
//!
//! A fenced client ([`fenced_client`]) adds [`FenceLayer`] under the rate limit, and sends its
//! writes through a connection pool of its own (`split`): reads keep kube's stack, writes go
//! over TCP streams that check the fence before every write to the socket, below TLS, and a
//! write still unanswered when the fence closes ends with [`Abandoned`].
//!
//! kube's own retry layer (`Config::default_retry`, which retries 429/503/504 for every verb,
//! POST included) is switched off: [`RetryLayer`] replaces it.
//!
//! # Retries
//!
//! | request                                          | 429   | 500/502/503/504 | connection refused | anything else |
//! |--------------------------------------------------|-------|-----------------|--------------------|---------------|
//! | watch (`watch=true` / `watch=1` in the query)    | no    | no              | no                 | no            |
//! | GET, HEAD, OPTIONS                               | retry | retry           | retry              | no            |
//! | PUT, DELETE, PATCH with apply or merge patch     | retry | retry (500: only with `Retry-After`) | retry | no     |
//! | POST, PATCH with JSON or strategic merge patch   | retry | no              | retry              | no            |
//!
//! - 429 means the server did not act on the request, so every verb retries; the wait is the
//!   `Retry-After` seconds, capped at [`ClientLimits::backoff_max`]. Without `Retry-After`, or
//!   with one in HTTP-date form (the API server sends seconds), the exponential backoff applies.
//! - After a 5xx the server may have applied the request, so only requests that are safe to
//!   repeat retry. A repeated PUT with a resourceVersion that had in fact succeeded answers 409
//!   and a repeated DELETE answers 404, both of which controllers already handle. A POST
//!   (create) could create twice (with `generateName`), so its 5xx goes to the caller.
//! - A write answered 500 is most often refused for what it carries (an admission webhook, a
//!   check the server cannot express otherwise), and sending it again repeats the refusal: as in
//!   client-go, it retries only when the server sends `Retry-After`.
//! - A refused connection means nothing was sent, so every verb retries. Other transport errors
//!   (reset, timeout) may come after the request reached the server and go to the caller.
//! - Exponential backoff: `backoff_base × 2^n`, capped at `backoff_max`, times a random factor
//!   in `(1/2, 1]`. At most [`ClientLimits::max_retries`] retries; the last failure is returned
//!   as the server sent it.
//! - Watches are never retried here; kube's watcher re-lists and re-watches itself.
//!
//! - A `Retry-After` on a retried 5xx (the API server sends one with some 503s) is honoured the
//!   same way as on a 429.
//!
//! # Guarantees
//! - A request is sent at most `max_retries + 1` times, and each attempt takes a token.
//! - A POST, or a JSON or strategic merge PATCH, is sent again only when the server certainly
//!   did not act on it: after a 429 or a refused connection.
//! - Request bodies are buffered once and every attempt sends the same bytes.
//! - Across all clones of one client, attempts never exceed `burst` at once and `qps` on average.
//!   Each call of [`client`] has its own bucket: build one client per plugin for per-plugin
//!   limits (each also has its own connection pool).
//!
//! # Rate limit
//! A token bucket of [`ClientLimits::burst`] tokens refilled at [`ClientLimits::qps`]; each
//! attempt, retries included, takes one token (client-go throttles retries too). A watch takes
//! one token to open and its stream is then never throttled, as in client-go.

mod abandon;
mod bucket;
mod fenced;
mod fenced_io;
mod layers;
mod limits;
mod policy;
mod split;
mod stats;

use kube::client::ClientBuilder;
use thiserror::Error;

pub use abandon::Abandoned;
pub use bucket::SharedBudget;
pub use fenced::{FenceLayer, Fenced};
pub use fenced_io::FenceClosed;
pub use layers::{RateLimit, RateLimitLayer, Retry, RetryLayer};
pub use limits::{
    ClientLimits, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_BURST, DEFAULT_MAX_RETRIES,
    DEFAULT_QPS, LimitsError,
};
pub use stats::{ClientStats, ClientStatsSnapshot};

/// Why [`client`] could not build a client.
#[derive(Debug, Error)]
pub enum ClientError {
    /// A limit is invalid.
    #[error("invalid API client limits")]
    Limits(#[from] LimitsError),
    /// kube refused the connection settings (TLS material, auth, proxy).
    #[error(
        "failed to build the API client for `{url}`; check the kubeconfig's cluster and user \
         entries"
    )]
    Build {
        /// The cluster URL from the configuration.
        url: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// A kube client for `config` with the rate limit and retries of `limits`.
///
/// Call it inside a tokio runtime: kube spawns the client's request buffer task.
///
/// # Errors
/// [`ClientError::Limits`] when `limits` is invalid; [`ClientError::Build`] when kube refuses
/// `config`.
pub fn client(config: kube::Config, limits: &ClientLimits) -> Result<kube::Client, ClientError> {
    client_with_stats(config, limits, &ClientStats::default())
}

/// Like [`client`], counting requests, throttled waits and retries in `stats` (pass one handle
/// per plugin to get per-plugin numbers, or share one for a host-wide total).
///
/// # Errors
/// As [`client`].
pub fn client_with_stats(
    config: kube::Config,
    limits: &ClientLimits,
    stats: &ClientStats,
) -> Result<kube::Client, ClientError> {
    build(config, limits, stats, None, None)
}

/// Like [`client`], sending writes only while `fence` is open; a refused write is not retried.
///
/// # Guarantees
/// - Checked before every attempt, after its rate-limit wait: a write refused there fails with
///   [`Fenced`] and sends nothing.
/// - Checked again on every write to the socket, below TLS, after the waits that follow
///   (connection pool, connect, TLS handshake, hyper's dispatch): once the fence is closed no
///   further byte of a write leaves the process (an io error of kind `PermissionDenied`
///   carrying [`FenceClosed`]).
/// - A write still unanswered when the fence closes (at its deadline, or closed early) ends at
///   once with [`Abandoned`]: it may or may not have reached the API server.
/// - Not guaranteed: bytes the kernel accepted before the process froze can still land.
///
/// Writes use a connection pool of their own, built as kube builds its default one (same TLS,
/// auth, headers and timeouts); reads use kube's.
///
/// Each request also waits for a token of `shared`, when given, after one of its own bucket.
///
/// # Errors
/// As [`client`].
pub fn fenced_client(
    config: kube::Config,
    limits: &ClientLimits,
    fence: crate::election::Fence,
    shared: Option<SharedBudget>,
) -> Result<kube::Client, ClientError> {
    build(config, limits, &ClientStats::default(), Some(fence), shared)
}

fn build(
    mut config: kube::Config,
    limits: &ClientLimits,
    stats: &ClientStats,
    fence: Option<crate::election::Fence>,
    shared: Option<SharedBudget>,
) -> Result<kube::Client, ClientError> {
    limits.validate()?;
    // Pin rustls to ring: with no provider (or two) enabled by the dependency graph, rustls
    // panics on the first HTTPS connection. Err means one is installed already; keep it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    config.default_retry = false;
    let url = config.cluster_url.to_string();
    // A fenced client's writes travel on a pool of their own, fenced down to the socket.
    let write =
        match &fence {
            Some(fence) => Some(split::WritePools::new(&config, fence).map_err(|source| {
                ClientError::Build {
                    url: url.clone(),
                    source,
                }
            })?),
            None => None,
        };
    let builder =
        ClientBuilder::try_from(config).map_err(|source| ClientError::Build { url, source })?;
    let fence = FenceLayer::new(fence.unwrap_or_else(crate::election::Fence::always_open));
    Ok(builder
        .with_layer(&split::SplitLayer::new(write))
        .with_layer(&fence)
        .with_layer(&RateLimitLayer::new(limits, stats.clone()).sharing(shared))
        .with_layer(&RetryLayer::new(limits, stats.clone()))
        .build())
}
