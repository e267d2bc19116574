//! Helpers shared by the integration tests: a started server, raw HTTP calls and watch readers.
#![allow(dead_code)]

use std::time::Duration;

use embedded_apiserver::{ApiServer, Config};
use futures::{AsyncBufReadExt, StreamExt};
use serde_json::Value;

/// Upper bound for any condition a test waits for.
pub const WAIT: Duration = Duration::from_secs(10);

/// A server with defaults.
pub async fn server() -> ApiServer {
    start(Config::default()).await
}

/// A server with `config`.
pub async fn start(config: Config) -> ApiServer {
    ApiServer::start(config)
        .await
        .expect("the embedded API server starts")
}

/// A raw HTTP client to one server.
pub struct Http {
    pub client: kube::Client,
}

impl Http {
    pub fn new(server: &ApiServer) -> Self {
        Http {
            client: server.kube_client().expect("kube client"),
        }
    }

    /// Sends a request and returns the status code and the JSON body (Null when not JSON).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> (u16, Value) {
        let (code, _, body) = self
            .call_with_headers(method, path, body, content_type)
            .await;
        (code, body)
    }

    /// Like `call`, also returning the response headers.
    pub async fn call_with_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> (u16, axum::http::HeaderMap, Value) {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(kube::client::Body::from(bytes))
            .expect("request");
        let resp = self.client.send(req).await.expect("response");
        let code = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(axum::body::Body::new(resp.into_body()), 64 << 20)
            .await
            .expect("body");
        (
            code,
            headers,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None, "application/json").await
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("POST", path, Some(body), "application/json")
            .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("PUT", path, Some(body), "application/json").await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
        self.call("PATCH", path, Some(body), content_type).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, None, "application/json").await
    }

    /// Opens a watch (the path carries the query) and returns a reader of its events.
    pub async fn watch(&self, path: &str) -> Watch {
        let req = axum::http::Request::get(path)
            .body(Vec::new())
            .expect("request");
        let reader = self.client.request_stream(req).await.expect("watch opens");
        Watch {
            lines: Box::pin(reader.lines()),
        }
    }
}

/// The events of one watch.
pub struct Watch {
    lines: std::pin::Pin<Box<dyn futures::Stream<Item = std::io::Result<String>> + Send>>,
}

impl Watch {
    /// The next event, or None when the stream ended; panics after `WAIT`.
    pub async fn next(&mut self) -> Option<Value> {
        let line = self.next_line().await?;
        Some(serde_json::from_str(&line).expect("watch event is JSON"))
    }

    /// The next event line as sent, or None when the stream ended; panics after `WAIT`.
    pub async fn next_line(&mut self) -> Option<String> {
        let line = tokio::time::timeout(WAIT, self.lines.next())
            .await
            .expect("a watch event or the end of the stream within the wait bound")?;
        Some(line.expect("watch line"))
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_change(&mut self) -> Option<Value> {
        loop {
            let e = self.next().await?;
            if e["type"] != "BOOKMARK" {
                return Some(e);
            }
        }
    }
}

/// A ConfigMap body.
pub fn configmap(name: &str, labels: Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    })
}

/// Polls `f` until it returns Some, at most `WAIT`.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The resourceVersion of an object as a number.
pub fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

/// A GET over a plain TCP connection (no client-side retries): status code and raw response.
pub async fn raw_get(base_url: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut out = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut out))
        .await
        .expect("response within the wait bound")
        .expect("read");
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    (code, out)
}
