//! The OCI registry of `dev`: an in-memory registry on loopback speaking the part of the OCI
//! distribution API that `reconcile-host push` and the host's pulls use (blob uploads in chunks
//! or whole, blobs and manifests by digest or tag), so `dev` serves its examples as
//! `ReconcilerPlugin` objects whose modules come from a registry, as in a cluster.
//!
//! It keeps what it is given until the process exits, checks each blob's and manifest's digest,
//! and bounds what it is sent ([`Limits`]): bodies are streamed and refused once past their
//! bound, with 413 and `SIZE_INVALID`; open upload sessions are counted (429
//! `TOOMANYREQUESTS`; `DELETE` on a session cancels it), and so is everything held (413
//! `DENIED`). It has no authentication and is only for loopback use.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use parking_lot::Mutex;

/// What the registry accepts.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// One blob, across all its chunks (the host accepts no larger module).
    blob: u64,
    /// One manifest (the host pulls no larger one).
    manifest: u64,
    /// Upload sessions open at once.
    sessions: usize,
    /// Everything held: blobs, manifests and uploads in progress.
    total: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            blob: crate::delivery::oci::MAX_MODULE_BYTES,
            manifest: crate::delivery::oci::MAX_MANIFEST_BYTES,
            sessions: 64,
            total: 2 << 30,
        }
    }
}

/// What the registry holds.
#[derive(Default)]
struct Store {
    limits: Limits,
    /// Blobs by digest (`sha256:…`), shared by every repository.
    blobs: HashMap<String, Bytes>,
    /// Manifests by `<repository>@<digest>`: media type and bytes.
    manifests: HashMap<String, (String, Bytes)>,
    /// Tags: `<repository>:<tag>` → digest.
    tags: HashMap<String, String>,
    /// Uploads in progress by id.
    uploads: HashMap<u64, Vec<u8>>,
    next_upload: u64,
    /// The bytes of `blobs`, `manifests` and `uploads` together.
    held: u64,
}

impl Store {
    /// Whether `more` bytes fit beside what is held.
    fn fits(&self, more: u64) -> bool {
        self.held.saturating_add(more) <= self.limits.total
    }

    /// Counts `new` bytes held in place of `old` ones.
    fn account(&mut self, old: u64, new: u64) {
        self.held = self.held.saturating_sub(old).saturating_add(new);
    }
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
    router_with(Limits::default())
}

/// The routes of an empty registry with `limits`.
fn router_with(limits: Limits) -> Router {
    let store = Store {
        limits,
        ..Store::default()
    };
    Router::new()
        .route("/v2/", axum::routing::get(|| async { "{}" }))
        .route("/v2/{*path}", axum::routing::any(route))
        .with_state(Arc::new(Mutex::new(store)))
}

/// One request under `/v2/`: `<repository>/blobs/…` or `<repository>/manifests/<reference>`.
async fn route(
    State(store): State<Shared>,
    method: Method,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some((repository, rest)) = path.split_once("/blobs/uploads") {
        let id = rest.trim_matches('/');
        return upload(&store, &method, repository, id, query.get("digest"), body).await;
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
        let body = if method == Method::PUT {
            let limit = store.lock().limits.manifest;
            match read_body(body, limit, "manifest").await {
                Ok(body) => body,
                Err(refused) => return refused,
            }
        } else {
            Bytes::new()
        };
        return manifest(&store, &method, repository, reference, &headers, body);
    }
    error(StatusCode::NOT_FOUND, "NAME_UNKNOWN", "no such route")
}

/// Reads `body` as it streams in, refusing it (413, `SIZE_INVALID`) once past `limit` bytes.
async fn read_body(body: Body, limit: u64, what: &str) -> Result<Bytes, Response> {
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "SIZE_INVALID",
            &format!("the {what} is larger than {limit} bytes"),
        )
    };
    let mut stream = body.into_data_stream();
    let mut data = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| {
            error(
                StatusCode::BAD_REQUEST,
                "BLOB_UPLOAD_INVALID",
                "the body ended early",
            )
        })?;
        if (data.len() + chunk.len()) as u64 > limit {
            return Err(too_large());
        }
        data.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(data))
}

/// `POST …/blobs/uploads/` opens an upload; `PATCH …/uploads/<id>` appends; `PUT
/// …/uploads/<id>?digest=` appends the last bytes and stores the blob if its digest matches;
/// `DELETE …/uploads/<id>` cancels it.
async fn upload(
    store: &Shared,
    method: &Method,
    repository: &str,
    id: &str,
    digest: Option<&String>,
    body: Body,
) -> Response {
    if *method == Method::POST && id.is_empty() {
        let mut store = store.lock();
        if store.uploads.len() >= store.limits.sessions {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "TOOMANYREQUESTS",
                &format!(
                    "{} uploads are open; finish or DELETE one first",
                    store.limits.sessions
                ),
            );
        }
        store.next_upload += 1;
        let id = store.next_upload;
        store.uploads.insert(id, Vec::new());
        return located(
            StatusCode::ACCEPTED,
            &format!("/v2/{repository}/blobs/uploads/{id}"),
        );
    }
    let unknown = || {
        error(
            StatusCode::NOT_FOUND,
            "BLOB_UPLOAD_UNKNOWN",
            "upload unknown",
        )
    };
    let Ok(id) = id.parse::<u64>() else {
        return unknown();
    };
    let (so_far, limits) = {
        let store = store.lock();
        match store.uploads.get(&id) {
            Some(data) => (data.len() as u64, store.limits),
            None => return unknown(),
        }
    };
    if *method == Method::DELETE {
        let mut store = store.lock();
        let removed = store
            .uploads
            .remove(&id)
            .map_or(0, |data| data.len() as u64);
        store.account(removed, 0);
        return StatusCode::NO_CONTENT.into_response();
    }
    if !matches!(*method, Method::PATCH | Method::PUT) {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "method not allowed",
        );
    }
    let body = match read_body(body, limits.blob.saturating_sub(so_far), "blob").await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let mut store = store.lock();
    if !store.fits(body.len() as u64) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "DENIED",
            &format!("the registry holds {} bytes at most", store.limits.total),
        );
    }
    let Some(data) = store.uploads.get_mut(&id) else {
        return unknown();
    };
    if (data.len() + body.len()) as u64 > limits.blob {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "SIZE_INVALID",
            &format!("the blob is larger than {} bytes", limits.blob),
        );
    }
    data.extend_from_slice(&body);
    store.account(0, body.len() as u64);
    if *method == Method::PATCH {
        return located(
            StatusCode::ACCEPTED,
            &format!("/v2/{repository}/blobs/uploads/{id}"),
        );
    }
    let Some(digest) = digest else {
        return error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "no digest");
    };
    let data = store.uploads.remove(&id).unwrap_or_default();
    if sha256(&data) != *digest {
        store.account(data.len() as u64, 0);
        return error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "digest mismatch");
    }
    // The upload's bytes now count as the blob's (or go, when the blob was held already).
    let replaced = store
        .blobs
        .insert(digest.clone(), Bytes::from(data))
        .map_or(0, |old| old.len() as u64);
    store.account(replaced, 0);
    let mut response = located(
        StatusCode::CREATED,
        &format!("/v2/{repository}/blobs/{digest}"),
    );
    set(&mut response, "Docker-Content-Digest", digest);
    response
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
        if !store.fits(body.len() as u64) {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "DENIED",
                &format!("the registry holds {} bytes at most", store.limits.total),
            );
        }
        let media_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/vnd.oci.image.manifest.v1+json")
            .to_owned();
        let size = body.len() as u64;
        let replaced = store
            .manifests
            .insert(format!("{repository}@{digest}"), (media_type, body))
            .map_or(0, |(_, old)| old.len() as u64);
        store.account(replaced, size);
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
mod tests;
