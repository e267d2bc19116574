//! The fence layer of a plugin's client: a write is sent only while the replica's [`Fence`]
//! is open, checked right before each attempt (after its rate-limit wait and before each
//! retry), so a replica whose lease lapsed — frozen, stalled, cut off — sends no write. Below
//! it, the write pool (`split`) checks the fence again on every write to the socket.

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request, Response};
use kube::client::Body;
use tower::{BoxError, Layer, Service};

use crate::election::Fence;

/// Why a write was not sent.
#[derive(Debug, thiserror::Error)]
#[error(
    "not sent: this replica's lease lapsed by its own clock, so it may not write (the key goes \
     back to the queue and is reconciled by the replica that holds the lease)"
)]
pub struct Fenced;

/// Whether a request writes: every method but GET, HEAD and OPTIONS.
#[must_use]
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Refuses writes (every method but GET, HEAD and OPTIONS) while the fence is closed.
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: Fence,
}

impl FenceLayer {
    /// A layer checking `fence`.
    #[must_use]
    pub fn new(fence: Fence) -> Self {
        Self { fence }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = FencedService<S>;

    fn layer(&self, inner: S) -> FencedService<S> {
        FencedService {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// The service of [`FenceLayer`].
#[derive(Clone, Debug)]
pub struct FencedService<S> {
    inner: S,
    fence: Fence,
}

impl<S, B> Service<Request<Body>> for FencedService<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if is_write(request.method()) && !self.fence.is_open() {
            self.fence.refuse_write();
            return Box::pin(std::future::ready(Err(BoxError::from(Fenced))));
        }
        let call = self.inner.call(request);
        Box::pin(async move { call.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};

    use super::*;
    use crate::client::{ClientLimits, fenced_client};

    #[tokio::test]
    async fn writes_wait_for_an_open_fence_and_reads_never_do() {
        let server = embedded_apiserver::ApiServer::start(embedded_apiserver::Config::default())
            .await
            .expect("server");
        let mut config = kube::Config::new(server.url().parse().expect("url"));
        config.default_namespace = "default".into();
        let fence = Fence::closed();
        let client =
            fenced_client(config, &ClientLimits::default(), fence.clone(), None).expect("client");
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let object = ConfigMap {
            metadata: kube::core::ObjectMeta {
                name: Some("fenced".to_owned()),
                ..Default::default()
            },
            ..ConfigMap::default()
        };
        let refused = api.create(&PostParams::default(), &object).await;
        let message = crate::error_chain(&refused.expect_err("refused"));
        assert!(message.contains("lease lapsed"), "{message}");
        assert!(
            api.get_opt("fenced")
                .await
                .expect("a read passes")
                .is_none()
        );
        fence.open_until(tokio::time::Instant::now() + std::time::Duration::from_secs(60));
        api.create(&PostParams::default(), &object)
            .await
            .expect("written while open");
        assert_eq!(fence.refused(), 1);
        fence.close();
        assert!(api.delete("fenced", &Default::default()).await.is_err());
        assert_eq!(fence.refused(), 2);
        assert!(api.get_opt("fenced").await.expect("read").is_some());
    }
}
