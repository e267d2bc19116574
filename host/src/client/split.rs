//! Two connection pools for a fenced client: reads keep kube's default stack; writes (every
//! method but GET, HEAD and OPTIONS) travel on a pool of their own whose TCP streams check the
//! replica's [`Fence`] on every write, below TLS, and whose answers are abandoned when the
//! fence closes first. The write pool belongs to one term of the fence: once the fence has
//! closed and opened again, writes go on a new pool (the old one's connections may no longer
//! write, and are dropped with it).
//!
//! The write pool is built as kube builds its default one (`ClientBuilder::try_from`): the
//! same TLS configuration (rustls, from `ConfigExt`), the same auth and header layers, the
//! same connect, read and write timeouts.

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt, DynBody};
use tower::util::BoxService;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

use super::abandon::AbandonService;
use super::fenced::is_write;
use super::fenced_io::FencedConnector;
use crate::election::{Fence, Term};

/// The write pool's stack, answering as kube's default stack does.
pub type WriteService = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// The write pool of the fence's current term, built again when a new term begins.
pub struct WritePools {
    config: kube::Config,
    fence: Fence,
    term: Option<Term>,
    pool: WriteService,
}

impl WritePools {
    /// The write pools for `config`, fenced by `fence`.
    ///
    /// # Errors
    /// As [`write_pool`].
    pub fn new(config: &kube::Config, fence: &Fence) -> Result<Self, kube::Error> {
        Ok(Self {
            config: config.clone(),
            fence: fence.clone(),
            term: fence.term(),
            pool: write_pool(config, fence)?,
        })
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let term = self.fence.term();
        if term.is_some() && term != self.term {
            self.pool = write_pool(&self.config, &self.fence)?;
            self.term = term;
        }
        self.pool.poll_ready(cx)
    }
}

/// The write pool for `config`, its streams fenced by `fence`.
///
/// # Errors
/// When kube refuses `config`'s TLS material or auth settings.
fn write_pool(config: &kube::Config, fence: &Fence) -> Result<WriteService, kube::Error> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    let tls =
        config.rustls_https_connector_with_connector(FencedConnector::new(tcp, fence.clone()))?;
    let mut connector = hyper_timeout::TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let pool: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .service(AbandonService::new(pool, fence.clone()));
    Ok(BoxService::new(service.map_err(Into::into)))
}

/// Routes writes to [`WritePools`], everything else to the stack below (all requests,
/// without write pools).
pub struct SplitLayer {
    write: parking_lot::Mutex<Option<WritePools>>,
}

impl SplitLayer {
    /// A layer sending writes through `write`, if any; it can be applied once.
    #[must_use]
    pub fn new(write: Option<WritePools>) -> Self {
        Self {
            write: parking_lot::Mutex::new(write),
        }
    }
}

impl<S> Layer<S> for SplitLayer {
    type Service = Split<S>;

    /// The write pool has one owner: applied a second time, the layer sends everything below.
    fn layer(&self, read: S) -> Split<S> {
        Split {
            read,
            write: self.write.lock().take(),
        }
    }
}

/// The service of [`SplitLayer`].
pub struct Split<S> {
    read: S,
    write: Option<WritePools>,
}

impl<S> Service<Request<Body>> for Split<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match (self.read.poll_ready(cx), &mut self.write) {
            (Poll::Ready(Ok(())), Some(write)) => write.poll_ready(cx),
            (Poll::Ready(Ok(())), None) => Poll::Ready(Ok(())),
            (Poll::Ready(Err(error)), _) => Poll::Ready(Err(error.into())),
            (Poll::Pending, _) => Poll::Pending,
        }
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if let Some(write) = self.write.as_mut().filter(|_| is_write(request.method())) {
            write.pool.call(request)
        } else {
            let call = self.read.call(request);
            Box::pin(async move { call.await.map_err(Into::into) })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use crate::client::{ClientLimits, fenced_client};
    use crate::election::Fence;

    /// A server that takes one request and never answers; sends what it read on `arrived`.
    async fn silent_server() -> (String, tokio::sync::oneshot::Receiver<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let (arrived_tx, arrived) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut received = Vec::new();
            let mut buffer = [0; 4096];
            while !received.windows(4).any(|window| window == b"\r\n\r\n") {
                match socket.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => received.extend_from_slice(&buffer[..read]),
                }
            }
            let _ = arrived_tx.send(received);
            // Holds the connection open, unanswered, until the test's runtime ends.
            std::future::pending::<()>().await;
            drop(socket);
        });
        (url, arrived)
    }

    /// A fence open for an hour, and a ConfigMap API of a fenced client of `url` (answers
    /// awaited as long).
    fn open_fence_and_api(url: &str) -> (Fence, Api<ConfigMap>) {
        let mut config = kube::Config::new(url.parse().expect("url"));
        config.default_namespace = "default".into();
        config.read_timeout = Some(Duration::from_secs(3600));
        let fence = Fence::closed();
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(3600));
        let client =
            fenced_client(config, &ClientLimits::default(), fence.clone(), None).expect("client");
        (fence, Api::namespaced(client, "default"))
    }

    #[tokio::test]
    async fn a_write_unanswered_when_the_fence_closes_ends_as_abandoned() {
        let (url, arrived) = silent_server().await;
        let (fence, api) = open_fence_and_api(&url);
        let object = ConfigMap {
            metadata: kube::core::ObjectMeta {
                name: Some("unanswered".to_owned()),
                ..Default::default()
            },
            ..ConfigMap::default()
        };
        let write = tokio::spawn(async move { api.create(&PostParams::default(), &object).await });
        let received = tokio::time::timeout(Duration::from_secs(60), arrived)
            .await
            .expect("the write reaches the server while the fence is open")
            .expect("server");
        assert!(received.starts_with(b"POST "), "{received:?}");
        fence.close();
        let ended = tokio::time::timeout(Duration::from_secs(60), write)
            .await
            .expect("the write ends when the fence closes, not at the read timeout")
            .expect("write task");
        let message = crate::error_chain(&ended.expect_err("abandoned"));
        assert!(
            message.contains("abandoned")
                && message.contains("may or may not have reached the API server"),
            "{message}"
        );
    }

    /// A server answering every request with `201` and a ConfigMap, keeping connections
    /// alive; counts the connections it accepted.
    async fn answering_server() -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut received = Vec::new();
                    let mut buffer = [0; 4096];
                    loop {
                        let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match socket.read(&mut buffer).await {
                                Ok(0) | Err(_) => return,
                                Ok(read) => received.extend_from_slice(&buffer[..read]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&received[..end]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .map_or(0, |value| value.trim().parse().expect("length"));
                        while received.len() < end + 4 + length {
                            match socket.read(&mut buffer).await {
                                Ok(0) | Err(_) => return,
                                Ok(read) => received.extend_from_slice(&buffer[..read]),
                            }
                        }
                        received.drain(..end + 4 + length);
                        let body =
                            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m"}}"#;
                        let answer = format!(
                            "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    #[tokio::test]
    async fn after_a_lapse_and_a_renewal_writes_go_on_new_connections_and_succeed() {
        let (url, accepted) = answering_server().await;
        let (fence, api) = open_fence_and_api(&url);
        let object = ConfigMap::default();
        api.create(&PostParams::default(), &object)
            .await
            .expect("written while open");
        api.create(&PostParams::default(), &object)
            .await
            .expect("written again, on the same connection");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        // A lapse and a renewal: a new term. The idle connection of the old one may not write.
        fence.close();
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(3600));
        api.create(&PostParams::default(), &object)
            .await
            .expect("the first write of the new term is sent, not refused");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "the new term's write went on a new connection"
        );
    }
}
