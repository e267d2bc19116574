//! The OCI registry of `dev`: an in-memory registry on loopback speaking the part of the OCI
//! distribution API that `reconcile-host push` and the host's pulls use (blob uploads in chunks
//! or whole, blobs and manifests by digest or tag), so `dev` serves its examples as
//! `ReconcilerPlugin` objects whose modules come from a registry, as in a cluster.
//!
//! It keeps what it is given until the process exits, checks each blob's and manifest's digest,
//! and bounds every upload; it has no authentication and is only for loopback use.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;

/// The largest blob or manifest accepted (the host accepts no larger module).
const MAX_BLOB: usize = crate::delivery::oci::MAX_MODULE_BYTES as usize;

/// What the registry holds.
#[derive(Default)]
struct Store {
    /// Blobs by digest (`sha256:…`), shared by every repository.
    blobs: HashMap<String, Bytes>,
    /// Manifests by `<repository>@<digest>`: media type and bytes.
    manifests: HashMap<String, (String, Bytes)>,
    /// Tags: `<repository>:<tag>` → digest.
    tags: HashMap<String, String>,
    /// Uploads in progress by id.
    uploads: HashMap<u64, Vec<u8>>,
    next_upload: u64,
}

type Shared = Arc<Mutex<Store>>;

/// Serves the registry on `listener` until the process exits; the address it serves.
///
/// # Errors
/// When the listener's address cannot be read.
pub fn serve(listener: tokio::net::TcpListener) -> std::io::Result<SocketAddr> {
    let address = listener.local_addr()?;
    let router = router();
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, "the dev registry stopped");
        }
    });
    Ok(address)
}

/// The routes of an empty registry.
fn router() -> Router {
    Router::new()
        .route("/v2/", axum::routing::get(|| async { "{}" }))
        .route("/v2/{*path}", axum::routing::any(route))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BLOB))
        .with_state(Shared::default())
}

/// One request under `/v2/`: `<repository>/blobs/…` or `<repository>/manifests/<reference>`.
async fn route(
    State(store): State<Shared>,
    method: Method,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if body.len() > MAX_BLOB {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "SIZE_INVALID", "too large");
    }
    if let Some((repository, rest)) = path.split_once("/blobs/uploads") {
        let id = rest.trim_matches('/');
        return upload(&store, &method, repository, id, query.get("digest"), &body);
    }
    // Blobs are shared by every repository, as a registry may.
    if let Some((_repository, digest)) = path.rsplit_once("/blobs/") {
        let blob = store.lock().blobs.get(digest).cloned();
        return match blob {
            Some(bytes) => content(&method, "application/octet-stream", digest, bytes),
            None => error(StatusCode::NOT_FOUND, "BLOB_UNKNOWN", "blob unknown"),
        };
    }
    if let Some((repository, reference)) = path.rsplit_once("/manifests/") {
        return manifest(&store, &method, repository, reference, &headers, body);
    }
    error(StatusCode::NOT_FOUND, "NAME_UNKNOWN", "no such route")
}

/// `POST …/blobs/uploads/` opens an upload; `PATCH …/uploads/<id>` appends; `PUT
/// …/uploads/<id>?digest=` appends the last bytes and stores the blob if its digest matches.
fn upload(
    store: &Shared,
    method: &Method,
    repository: &str,
    id: &str,
    digest: Option<&String>,
    body: &Bytes,
) -> Response {
    let mut store = store.lock();
    if *method == Method::POST && id.is_empty() {
        store.next_upload += 1;
        let id = store.next_upload;
        store.uploads.insert(id, Vec::new());
        return located(
            StatusCode::ACCEPTED,
            &format!("/v2/{repository}/blobs/uploads/{id}"),
        );
    }
    let Some(data) = id.parse().ok().and_then(|id| store.uploads.get_mut(&id)) else {
        return error(
            StatusCode::NOT_FOUND,
            "BLOB_UPLOAD_UNKNOWN",
            "upload unknown",
        );
    };
    if data.len() + body.len() > MAX_BLOB {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "SIZE_INVALID", "too large");
    }
    data.extend_from_slice(body);
    match *method {
        Method::PATCH => located(
            StatusCode::ACCEPTED,
            &format!("/v2/{repository}/blobs/uploads/{id}"),
        ),
        Method::PUT => {
            let Some(digest) = digest else {
                return error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "no digest");
            };
            let data = store
                .uploads
                .remove(&id.parse().unwrap_or_default())
                .unwrap_or_default();
            if sha256(&data) != *digest {
                return error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "digest mismatch");
            }
            store.blobs.insert(digest.clone(), Bytes::from(data));
            let mut response = located(
                StatusCode::CREATED,
                &format!("/v2/{repository}/blobs/{digest}"),
            );
            set(&mut response, "Docker-Content-Digest", digest);
            response
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "method not allowed",
        ),
    }
}

/// `PUT` stores a manifest under its digest (and its tag, when the reference is one); `GET`
/// and `HEAD` answer it by digest or tag.
fn manifest(
    store: &Shared,
    method: &Method,
    repository: &str,
    reference: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let mut store = store.lock();
    if *method == Method::PUT {
        let digest = sha256(&body);
        if reference.starts_with("sha256:") && reference != digest {
            return error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "digest mismatch");
        }
        let media_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/vnd.oci.image.manifest.v1+json")
            .to_owned();
        store
            .manifests
            .insert(format!("{repository}@{digest}"), (media_type, body));
        if !reference.starts_with("sha256:") {
            store
                .tags
                .insert(format!("{repository}:{reference}"), digest.clone());
        }
        let mut response = located(
            StatusCode::CREATED,
            &format!("/v2/{repository}/manifests/{digest}"),
        );
        set(&mut response, "Docker-Content-Digest", &digest);
        return response;
    }
    let digest = if reference.starts_with("sha256:") {
        Some(reference.to_owned())
    } else {
        store
            .tags
            .get(&format!("{repository}:{reference}"))
            .cloned()
    };
    let found = digest.and_then(|digest| {
        let (media_type, bytes) = store.manifests.get(&format!("{repository}@{digest}"))?;
        Some((digest, media_type.clone(), bytes.clone()))
    });
    match found {
        Some((digest, media_type, bytes)) => content(method, &media_type, &digest, bytes),
        None => error(
            StatusCode::NOT_FOUND,
            "MANIFEST_UNKNOWN",
            "manifest unknown",
        ),
    }
}

/// A blob or manifest: its bytes for `GET`, only its headers for `HEAD`.
fn content(method: &Method, media_type: &str, digest: &str, bytes: Bytes) -> Response {
    let length = bytes.len();
    let mut response = if *method == Method::HEAD {
        StatusCode::OK.into_response()
    } else {
        (StatusCode::OK, bytes).into_response()
    };
    set(&mut response, header::CONTENT_TYPE.as_str(), media_type);
    set(
        &mut response,
        header::CONTENT_LENGTH.as_str(),
        &length.to_string(),
    );
    set(&mut response, "Docker-Content-Digest", digest);
    response
}

fn located(status: StatusCode, location: &str) -> Response {
    let mut response = status.into_response();
    set(&mut response, header::LOCATION.as_str(), location);
    response
}

fn set(response: &mut Response, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (
        header::HeaderName::try_from(name),
        HeaderValue::from_str(value),
    ) {
        response.headers_mut().insert(name, value);
    }
}

/// An error in the distribution API's form.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({"errors": [{"code": code, "message": message}]});
    (status, axum::Json(body)).into_response()
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::wasm::module::hex_sha256(bytes))
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    /// Sends one request; the status, the `Docker-Content-Digest` and `Location` headers and
    /// the body.
    async fn send(
        router: &Router,
        method: Method,
        uri: &str,
        body: &[u8],
    ) -> (StatusCode, String, String, Bytes) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(
                header::CONTENT_TYPE,
                "application/vnd.oci.image.manifest.v1+json",
            )
            .body(Body::from(body.to_vec()))
            .expect("request");
        let response = router.clone().oneshot(request).await.expect("infallible");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let (digest, location) = (header("Docker-Content-Digest"), header("Location"));
        let status = response.status();
        let body = to_bytes(response.into_body(), 1 << 20).await.expect("body");
        (status, digest, location, body)
    }

    #[tokio::test]
    async fn a_blob_uploaded_in_chunks_is_kept_only_under_its_own_digest() {
        let router = router();
        let (status, _, location, _) =
            send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let (status, _, location, _) = send(&router, Method::PATCH, &location, b"hello ").await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let wrong = sha256(b"something else");
        let (status, ..) = send(
            &router,
            Method::PUT,
            &format!("{location}?digest={wrong}"),
            b"world",
        )
        .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "a digest that does not match is refused"
        );
        let (status, ..) = send(
            &router,
            Method::GET,
            &format!("/v2/examples/a/blobs/{wrong}"),
            b"",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        let (_, _, location, _) =
            send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
        let (_, _, location, _) = send(&router, Method::PATCH, &location, b"hello ").await;
        let digest = sha256(b"hello world");
        let (status, header, _, _) = send(
            &router,
            Method::PUT,
            &format!("{location}?digest={digest}"),
            b"world",
        )
        .await;
        assert_eq!(
            (status, header.as_str()),
            (StatusCode::CREATED, digest.as_str())
        );
        let (status, header, _, body) = send(
            &router,
            Method::GET,
            &format!("/v2/examples/a/blobs/{digest}"),
            b"",
        )
        .await;
        assert_eq!((status, header.as_str()), (StatusCode::OK, digest.as_str()));
        assert_eq!(&body[..], b"hello world");
    }

    #[tokio::test]
    async fn a_manifest_pushed_to_a_tag_is_served_by_tag_and_by_digest() {
        let router = router();
        let manifest = br#"{"schemaVersion":2}"#;
        let digest = sha256(manifest);
        let (status, header, ..) = send(
            &router,
            Method::PUT,
            "/v2/examples/a/manifests/dev",
            manifest,
        )
        .await;
        assert_eq!(
            (status, header.as_str()),
            (StatusCode::CREATED, digest.as_str())
        );
        for reference in ["dev", digest.as_str()] {
            let uri = format!("/v2/examples/a/manifests/{reference}");
            let (status, header, _, body) = send(&router, Method::GET, &uri, b"").await;
            assert_eq!(
                (status, header.as_str()),
                (StatusCode::OK, digest.as_str()),
                "{reference}"
            );
            assert_eq!(&body[..], manifest);
            let (status, header, _, body) = send(&router, Method::HEAD, &uri, b"").await;
            assert_eq!(
                (status, header.as_str()),
                (StatusCode::OK, digest.as_str()),
                "{reference}"
            );
            assert!(body.is_empty(), "HEAD has no body");
        }
        let (status, ..) = send(&router, Method::GET, "/v2/examples/b/manifests/dev", b"").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "tags are per repository");
        let wrong = sha256(b"other");
        let (status, ..) = send(
            &router,
            Method::PUT,
            &format!("/v2/examples/a/manifests/{wrong}"),
            manifest,
        )
        .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "a manifest pushed to another digest"
        );
    }

    #[tokio::test]
    async fn an_upload_that_was_never_opened_is_unknown() {
        let router = router();
        let (status, _, _, body) = send(
            &router,
            Method::PATCH,
            "/v2/examples/a/blobs/uploads/7",
            b"x",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(String::from_utf8_lossy(&body).contains("BLOB_UPLOAD_UNKNOWN"));
    }
}
