//! Raw HTTP to one API server for the fidelity suite: kube's client with its retry layer off, so
//! a 429, 503 or 504 comes back as it was answered, once.

use serde_json::Value;

/// The User-Agent of every request: both servers derive the Update field manager from it.
const USER_AGENT: &str = "fidelity/1.0 (linux/amd64) kubernetes/v0.0.0";

/// One API server under comparison.
pub struct Server {
    /// `real` or `embedded`, for messages.
    pub name: &'static str,
    client: kube::Client,
    /// The same server without credentials: steps that send their own bearer token (or none).
    bare: kube::Client,
}

/// One answer: status code, content type and body (JSON when it parses, else a string; a watch
/// stream is an array of its events).
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: u16,
    pub content_type: String,
    /// The `Warning` headers, in order.
    pub warnings: Vec<String>,
    pub body: Value,
}

impl Server {
    /// A server at `url`, with `token` as the bearer token when given. The certificate is not
    /// verified: the real server's is self-signed and this is a test client.
    pub fn new(name: &'static str, url: &str, token: Option<&str>) -> Self {
        let client = |token: Option<&str>| {
            let mut config = kube::Config::new(url.parse().expect("the server URL parses"));
            config.accept_invalid_certs = true;
            config.default_retry = false;
            config.auth_info.token = token.map(|t| t.to_owned().into());
            kube::Client::try_from(config)
                .unwrap_or_else(|e| panic!("a kube client for the {name} server at {url}: {e}"))
        };
        Self {
            name,
            client: client(token),
            bare: client(None),
        }
    }

    /// Sends one request as the server's admin and reads the whole answer (a watch must carry
    /// `timeoutSeconds`).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Reply {
        self.send_as(None, method, path, headers, body).await
    }

    /// Like [`send`](Self::send); with `bearer`, as whoever that token names instead of the
    /// admin (an empty token: no credentials, anonymous).
    pub async fn send_as(
        &self,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Reply {
        // kube's request builder makes an `http::Request`; every part is then set by hand.
        let mut request = kube::core::Request::new("")
            .get("x", &Default::default())
            .expect("a request");
        *request.method_mut() = method
            .parse()
            .unwrap_or_else(|e| panic!("`{method}` is not an HTTP method: {e}"));
        *request.uri_mut() = path
            .parse()
            .unwrap_or_else(|e| panic!("`{path}` is not a request path: {e}"));
        let map = request.headers_mut();
        map.insert("user-agent", USER_AGENT.parse().expect("a header value"));
        for (name, value) in headers {
            let name: &'static str = Box::leak(name.to_ascii_lowercase().into_boxed_str());
            map.insert(
                name,
                value
                    .parse()
                    .unwrap_or_else(|e| panic!("header {name}: `{value}` is not valid: {e}")),
            );
        }
        if let Some(token) = bearer.filter(|t| !t.is_empty()) {
            map.insert(
                "authorization",
                format!("Bearer {token}").parse().expect("a header value"),
            );
        }
        *request.body_mut() = body;
        let client = if bearer.is_some() {
            &self.bare
        } else {
            &self.client
        };
        let response = client
            .send(request.map(kube::client::Body::from))
            .await
            .unwrap_or_else(|e| panic!("{method} {path} to the {} server failed: {e}", self.name));
        let code = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect();
        let bytes = response
            .into_body()
            .collect_bytes()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "reading the answer to {method} {path} from the {} server: {e}",
                    self.name
                )
            });
        Reply {
            code,
            content_type,
            warnings,
            body: parse(&bytes),
        }
    }
}

/// JSON, a stream of JSON documents (a watch: an array of them), or else the text.
fn parse(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    if let Ok(value) = serde_json::from_slice(bytes) {
        return value;
    }
    let stream: Result<Vec<Value>, _> = serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .collect();
    match stream {
        Ok(events) => Value::Array(events),
        Err(_) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
    }
}
