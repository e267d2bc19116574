//! An OTLP trace receiver for the tests: the collector's gRPC `TraceService` (what
//! kube-apiserver's and the host's exporters send to), keeping every span it is sent with the
//! `service.name` of its sender.

use std::net::SocketAddr;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use parking_lot::Mutex;

/// One span received, with the service that sent it.
#[derive(Clone, Debug)]
pub struct Received {
    /// `service.name` of the sender's resource.
    pub service: String,
    /// The span.
    pub span: Span,
}

impl Received {
    /// The span's attribute `key` as text (strings, integers and booleans).
    pub fn attribute(&self, key: &str) -> Option<String> {
        attribute(&self.span.attributes, key)
    }

    /// The span's trace id in hex.
    pub fn trace_id(&self) -> String {
        hex(&self.span.trace_id)
    }

    /// The span's id in hex.
    pub fn span_id(&self) -> String {
        hex(&self.span.span_id)
    }
}

/// `key` of `attributes` as text.
pub fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value.value.as_ref()? {
        Value::StringValue(text) => Some(text.clone()),
        Value::IntValue(n) => Some(n.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock();
        for resource in request.into_inner().resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| attribute(&r.attributes, "service.name"))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(Received {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A receiver serving until dropped.
pub struct Receiver {
    collector: Collector,
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Receiver {
    /// Serves on `address` (port 0: any free port).
    pub async fn start(address: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .unwrap_or_else(|e| panic!("cannot bind the OTLP receiver on {address}: {e}"));
        let address = listener.local_addr().expect("bound");
        let collector = Collector::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service = TraceServiceServer::new(collector.clone());
        let incoming = tokio_stream_of(listener);
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            collector,
            address,
            stop: Some(stop),
        }
    }

    /// `http://<address>`: what `OTEL_EXPORTER_OTLP_ENDPOINT` names.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.collector.spans.lock().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The listener's connections as the stream tonic serves.
fn tokio_stream_of(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}
