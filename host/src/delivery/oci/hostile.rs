//! Pulls from hostile registries: a raw HTTP server on loopback announcing huge manifests,
//! streaming endless ones, answering errors with 64 MiB bodies and redirecting away or in
//! circles; each pull must be refused within its bounds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Text in every hostile body: it must never reach an error.
const MARKER: &str = "HOSTILE-REGISTRY-MARKER";
/// How long a gated body waits for the client to hang up before it sends the rest.
const GATE: Duration = Duration::from_secs(30);
/// The pieces bodies are written in.
const PIECE: usize = 64 << 10;

/// One request the server read.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

/// What the server writes after the head.
enum Body {
    Bytes(Vec<u8>),
    /// `total` bytes of `MARKER`s, in pieces, until the client hangs up.
    Repeat(u64),
    /// Chunked transfer coding: `total` bytes of chunks, until the client hangs up.
    Chunked(u64),
    /// One piece, then nothing until the client hangs up or [`GATE`] passes, then the rest of
    /// `total`.
    Gated(u64),
}

struct Answer {
    head: String,
    body: Body,
}

impl Answer {
    fn ok(content_type: &str, body: Vec<u8>) -> Self {
        Self {
            head: format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
                body.len()
            ),
            body: Body::Bytes(body),
        }
    }

    fn status(line: &str, headers: &str, body: Body) -> Self {
        Self {
            head: format!("HTTP/1.1 {line}\r\n{headers}"),
            body,
        }
    }
}

type Respond = Arc<dyn Fn(&Seen) -> Answer + Send + Sync>;

/// A registry on loopback answering as told, recording what it was sent.
struct Server {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
    written: Arc<AtomicU64>,
}

impl Server {
    /// A server whose `/v2/` answers `{}` (no authentication) and `respond` answers the rest.
    async fn start(respond: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Self {
        Self::start_raw(move |seen| {
            if seen.path == "/v2/" {
                Answer::ok("application/json", b"{}".to_vec())
            } else {
                respond(seen)
            }
        })
        .await
    }

    /// A server where `respond` answers every request.
    async fn start_raw(respond: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let server = Self {
            address: listener.local_addr().expect("address"),
            seen: Arc::default(),
            connections: Arc::default(),
            written: Arc::default(),
        };
        let respond: Respond = Arc::new(respond);
        let (seen, connections, written) = (
            server.seen.clone(),
            server.connections.clone(),
            server.written.clone(),
        );
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let (respond, seen, written) = (respond.clone(), seen.clone(), written.clone());
                tokio::spawn(serve(stream, respond, seen, written));
            }
        });
        server
    }

    fn host(&self) -> String {
        self.address.to_string()
    }

    fn requests_to(&self, part: &str) -> Vec<Seen> {
        let seen = self.seen.lock();
        seen.iter()
            .filter(|seen| seen.path.contains(part))
            .cloned()
            .collect()
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }
}

/// Answers one request on `stream` (`Connection: close`).
async fn serve(
    mut stream: TcpStream,
    respond: Respond,
    seen: Arc<Mutex<Vec<Seen>>>,
    written: Arc<AtomicU64>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let path = text.split(' ').nth(1).unwrap_or_default().to_owned();
    let authorization = text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("authorization")
            .then(|| value.trim().to_owned())
    });
    let request = Seen {
        path,
        authorization,
    };
    seen.lock().push(request.clone());
    let answer = respond(&request);
    let head = format!("{}Connection: close\r\n\r\n", answer.head);
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let piece = MARKER.repeat(PIECE / MARKER.len() + 1).into_bytes()[..PIECE].to_vec();
    match answer.body {
        Body::Bytes(bytes) => {
            send(&mut stream, &written, &bytes).await;
        }
        Body::Repeat(total) => {
            let mut left = total;
            while left > 0 {
                let n = left.min(PIECE as u64) as usize;
                if !send(&mut stream, &written, &piece[..n]).await {
                    return;
                }
                left -= n as u64;
            }
        }
        Body::Chunked(total) => {
            let mut chunk = format!("{PIECE:x}\r\n").into_bytes();
            chunk.extend_from_slice(&piece);
            chunk.extend_from_slice(b"\r\n");
            for _ in 0..total / PIECE as u64 {
                if !send(&mut stream, &written, &chunk).await {
                    return;
                }
            }
            send(&mut stream, &written, b"0\r\n\r\n").await;
        }
        Body::Gated(total) => {
            if !send(&mut stream, &written, &piece).await {
                return;
            }
            let mut buffer = [0u8; 64];
            // A client that refused hangs up: read gives 0 (or an error).
            if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(GATE, stream.read(&mut buffer)).await {
                return;
            }
            let mut left = total - PIECE as u64;
            while left > 0 {
                let n = left.min(PIECE as u64) as usize;
                if !send(&mut stream, &written, &piece[..n]).await {
                    return;
                }
                left -= n as u64;
            }
        }
    }
    let _ = stream.shutdown().await;
}

/// Writes `bytes`, counting them in `written` when they went out.
async fn send(stream: &mut TcpStream, written: &AtomicU64, bytes: &[u8]) -> bool {
    let sent = stream.write_all(bytes).await.is_ok();
    if sent {
        written.fetch_add(bytes.len() as u64, Ordering::SeqCst);
    }
    sent
}

/// The module every manifest here names, and a manifest naming it.
const MODULE: &[u8] = b"\0asm\x0d\0\x01\0 a hostile registry's module";

fn manifest_naming_the_module() -> Vec<u8> {
    let layer = format!("sha256:{}", cache::hex_encode(Sha256::digest(MODULE)));
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_MEDIA_TYPE,
        "config": {"mediaType": CNCF_CONFIG_MEDIA_TYPE,
                   "digest": format!("sha256:{}", "c".repeat(64)), "size": 2},
        "layers": [{"mediaType": CNCF_LAYER_MEDIA_TYPE, "digest": layer,
                    "size": MODULE.len()}],
    }))
    .expect("manifest")
}

/// A registry client trusting `servers` over plain HTTP, with a fresh cache, and a docker
/// config when given.
fn registry_for(servers: &[&Server], docker_config: Option<&str>) -> (Registry, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let docker_config = docker_config.map(|text| {
        let path = tmp.path().join("config.json");
        std::fs::write(&path, text).expect("docker config");
        path
    });
    let settings = OciSettings {
        insecure_registries: servers.iter().map(|server| server.host()).collect(),
        docker_config,
        ..OciSettings::default()
    };
    let registry = Registry::new(&settings, tmp.path().join("cache")).expect("registry");
    (registry, tmp)
}

/// The error's text with its whole source chain and its debug form.
fn everything_said(error: &OciError) -> String {
    let mut text = format!("{error} / {error:?}");
    let mut next = std::error::Error::source(error);
    while let Some(source) = next {
        text.push_str(&format!(" / {source}"));
        next = source.source();
    }
    text
}

/// A pull, bounded in time: a pull that hangs fails the test instead of stalling it.
async fn pull(registry: &Registry, reference: &str) -> Result<Pulled, OciError> {
    tokio::time::timeout(Duration::from_secs(300), registry.pull(reference, None))
        .await
        .expect("the pull ends")
}

#[tokio::test]
async fn a_manifest_announcing_a_gibibyte_is_refused_before_its_body_is_read() {
    let server = Server::start(|_| {
        Answer::status(
            "200 OK",
            &format!(
                "Content-Type: {OCI_IMAGE_MEDIA_TYPE}\r\nContent-Length: {}\r\n",
                1u64 << 30
            ),
            Body::Gated(16 << 20),
        )
    })
    .await;
    let (registry, _tmp) = registry_for(&[&server], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", server.host()))
        .await
        .unwrap_err();
    assert!(
        matches!(error, OciError::ManifestTooLarge { size, .. } if size == 1 << 30),
        "{error}"
    );
    assert!(
        server.written() < 1 << 20,
        "the server wrote {} bytes of the manifest before the pull hung up",
        server.written()
    );
}

#[tokio::test]
async fn an_endless_chunked_manifest_is_refused_after_four_mebibytes() {
    let server = Server::start(|_| {
        Answer::status(
            "200 OK",
            &format!("Content-Type: {OCI_IMAGE_MEDIA_TYPE}\r\nTransfer-Encoding: chunked\r\n"),
            Body::Chunked(256 << 20),
        )
    })
    .await;
    let (registry, _tmp) = registry_for(&[&server], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", server.host()))
        .await
        .unwrap_err();
    let OciError::ManifestTooLarge { size, limit, .. } = error else {
        panic!("{error}");
    };
    assert_eq!(limit, 4 << 20);
    assert!(
        size > limit && size <= limit + (1 << 20),
        "refused at {size} bytes"
    );
    // What the kernel's socket buffers took besides: far from the 256 MiB offered.
    assert!(
        server.written() < 64 << 20,
        "the server wrote {} bytes",
        server.written()
    );
}

/// A 503 with a 64 MiB body, on the manifest and then on the layer: read at most 4 KiB of it,
/// and none of its text in the error; an error with a short body is known by its code.
#[tokio::test]
async fn error_answers_are_read_within_bounds_and_never_repeated() {
    let huge_503 = || {
        Answer::status(
            "503 Service Unavailable",
            &format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                64u64 << 20
            ),
            Body::Repeat(64 << 20),
        )
    };
    let server = Server::start(move |_| huge_503()).await;
    let (registry, _tmp) = registry_for(&[&server], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", server.host()))
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unavailable { .. }), "{error}");
    assert!(error.is_unreachable());
    let said = everything_said(&error);
    assert!(!said.contains(MARKER), "{said}");
    assert!(said.contains("503"), "{said}");
    assert!(
        server.written() < 32 << 20,
        "the server wrote {} bytes",
        server.written()
    );

    let manifest = manifest_naming_the_module();
    let layer_server = Server::start(move |seen| {
        if seen.path.contains("/manifests/") {
            Answer::ok(OCI_IMAGE_MEDIA_TYPE, manifest.clone())
        } else {
            huge_503()
        }
    })
    .await;
    let (registry, _tmp) = registry_for(&[&layer_server], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", layer_server.host()))
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unavailable { .. }), "{error}");
    let said = everything_said(&error);
    assert!(!said.contains(MARKER), "{said}");
    assert!(said.contains("layer"), "{said}");
    assert!(
        layer_server.written() < 32 << 20,
        "the server wrote {} bytes",
        layer_server.written()
    );

    let coded = Server::start(|_| {
        let body = format!(r#"{{"errors":[{{"code":"TOOMANYREQUESTS","message":"{MARKER}"}}]}}"#);
        Answer::status(
            "400 Bad Request",
            &format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ),
            Body::Bytes(body.into_bytes()),
        )
    })
    .await;
    let (registry, _tmp) = registry_for(&[&coded], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", coded.host()))
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unavailable { .. }), "{error}");
    let said = everything_said(&error);
    assert!(said.contains("TOOMANYREQUESTS"), "{said}");
    assert!(!said.contains(MARKER), "{said}");
}

#[tokio::test]
async fn a_manifest_redirected_to_another_host_is_refused_without_connecting_there() {
    let elsewhere = Server::start(|_| Answer::ok(OCI_IMAGE_MEDIA_TYPE, b"{}".to_vec())).await;
    let target = format!("http://{}/v2/plugins/x/manifests/v1", elsewhere.host());
    let server = Server::start(move |_| {
        Answer::status(
            "307 Temporary Redirect",
            &format!("Location: {target}\r\nContent-Length: 0\r\n"),
            Body::Bytes(Vec::new()),
        )
    })
    .await;
    let (registry, _tmp) = registry_for(&[&server, &elsewhere], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", server.host()))
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Redirect { .. }), "{error}");
    let said = error.to_string();
    assert!(
        said.contains(&format!("http://{}", server.host()))
            && said.contains(&format!("http://{}", elsewhere.host())),
        "both origins are named: {said}"
    );
    assert_eq!(elsewhere.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn redirects_stop_after_five() {
    let server = Server::start(|seen| {
        let next = format!("{}x", seen.path);
        Answer::status(
            "302 Found",
            &format!("Location: {next}\r\nContent-Length: 0\r\n"),
            Body::Bytes(Vec::new()),
        )
    })
    .await;
    let (registry, _tmp) = registry_for(&[&server], None);
    let error = pull(&registry, &format!("{}/plugins/x:v1", server.host()))
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Redirect { .. }), "{error}");
    assert_eq!(
        server.requests_to("/manifests/").len(),
        6,
        "the first GET and five redirects"
    );
}

/// A layer moved to a CDN is fetched there without the registry's credentials, and verified.
#[tokio::test]
async fn a_layer_on_another_host_is_fetched_without_credentials() {
    let cdn = Server::start(|_| Answer::ok("application/octet-stream", MODULE.to_vec())).await;
    let cdn_url = format!("http://{}/blob", cdn.host());
    let manifest = manifest_naming_the_module();
    let server = Server::start(move |seen| {
        if seen.path.contains("/manifests/") {
            Answer::ok(OCI_IMAGE_MEDIA_TYPE, manifest.clone())
        } else {
            Answer::status(
                "307 Temporary Redirect",
                &format!("Location: {cdn_url}\r\nContent-Length: 0\r\n"),
                Body::Bytes(Vec::new()),
            )
        }
    })
    .await;
    let config = format!(
        r#"{{"auths": {{"{}": {{"username": "u", "password": "secret"}}}}}}"#,
        server.host()
    );
    let (registry, _tmp) = registry_for(&[&server, &cdn], Some(&config));
    let pulled = pull(&registry, &format!("{}/plugins/x:v1", server.host()))
        .await
        .expect("pulled through the CDN");
    assert_eq!(std::fs::read(&pulled.path).expect("module"), MODULE);
    let blob_requests = server.requests_to("/blobs/");
    assert!(
        blob_requests.iter().all(|seen| seen
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic "))),
        "the registry gets the credentials: {blob_requests:?}"
    );
    let at_cdn = cdn.requests_to("/blob");
    assert_eq!(at_cdn.len(), 1);
    assert_eq!(at_cdn[0].authorization, None, "the CDN gets none");
}

/// A docker config's `identitytoken` (an OAuth2 refresh token) was sent as `Bearer <token>` to
/// a registry that challenged for a token; the config is now refused and nothing is sent.
#[tokio::test]
async fn a_docker_config_with_an_identity_token_is_refused_and_nothing_is_sent() {
    let manifest = manifest_naming_the_module();
    let server = Server::start_raw(move |seen| {
        if seen.authorization.is_none() {
            Answer::status(
                "401 Unauthorized",
                "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:1/token\",service=\"r\"\r\n\
                 Content-Length: 0\r\n",
                Body::Bytes(Vec::new()),
            )
        } else {
            Answer::ok(OCI_IMAGE_MEDIA_TYPE, manifest.clone())
        }
    })
    .await;
    let config = format!(
        r#"{{"auths": {{"{}": {{"identitytoken": "REFRESH-TOKEN-SECRET"}}}}}}"#,
        server.host()
    );
    let tmp = tempfile::tempdir().expect("scratch dir");
    let path = tmp.path().join("config.json");
    std::fs::write(&path, config).expect("docker config");
    let settings = OciSettings {
        insecure_registries: vec![server.host()],
        docker_config: Some(path),
        ..OciSettings::default()
    };
    let outcome = Registry::new(&settings, tmp.path().join("cache"));
    let sent: Vec<Option<String>> = match &outcome {
        Ok(registry) => {
            let _ = pull(registry, &format!("{}/plugins/x:v1", server.host())).await;
            server
                .seen
                .lock()
                .iter()
                .map(|seen| seen.authorization.clone())
                .collect()
        }
        Err(_) => Vec::new(),
    };
    let error = outcome
        .err()
        .unwrap_or_else(|| panic!("the config was used; sent {sent:?}"));
    assert!(matches!(error, OciError::DockerConfig { .. }), "{error}");
    let said = error.to_string();
    assert!(
        said.contains(&format!("`auths.{}`", server.host())),
        "{said}"
    );
    assert!(said.contains("`username` and `password`"), "{said}");
    assert!(!said.contains("REFRESH-TOKEN-SECRET"), "{said}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);
}
