//! The dev registry: uploads, manifests and tags, and the bounds on what it is sent.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, to_bytes};
use axum::http::Request;
use futures::StreamExt as _;
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

#[tokio::test]
async fn a_manifest_over_four_mebibytes_is_refused_as_size_invalid() {
    let router = router();
    let manifest = vec![b' '; 5 << 20];
    let (status, _, _, body) = send(
        &router,
        Method::PUT,
        "/v2/examples/a/manifests/dev",
        &manifest,
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("SIZE_INVALID"));
    let (status, ..) = send(&router, Method::GET, "/v2/examples/a/manifests/dev", b"").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was kept");
}

/// A body is refused as it streams in: a manifest that never ends is cut off after its bound,
/// not read whole first.
#[tokio::test]
async fn an_endless_body_is_refused_after_its_bound() {
    let router = router();
    let yielded = std::sync::Arc::new(AtomicU64::new(0));
    let counted = yielded.clone();
    let piece = Bytes::from(vec![b' '; 64 << 10]);
    let stream = futures::stream::repeat(piece)
        .take(4096) // 256 MiB: more than any bound
        .map(move |piece| {
            counted.fetch_add(piece.len() as u64, Ordering::SeqCst);
            Ok::<_, std::io::Error>(piece)
        });
    let request = Request::builder()
        .method(Method::PUT)
        .uri("/v2/examples/a/manifests/dev")
        .body(Body::from_stream(stream))
        .expect("request");
    let response = router.oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let read = yielded.load(Ordering::SeqCst);
    assert!(
        read <= (4 << 20) + (64 << 10),
        "the registry read {read} bytes of the body"
    );
}

#[tokio::test]
async fn a_blob_over_sixty_four_mebibytes_across_chunks_is_refused() {
    let router = router();
    let (_, _, location, _) =
        send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
    let (status, _, location, _) =
        send(&router, Method::PATCH, &location, &vec![0u8; 40 << 20]).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _, _, body) = send(&router, Method::PATCH, &location, &vec![0u8; 30 << 20]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("SIZE_INVALID"));
}

#[tokio::test]
async fn at_most_sixty_four_uploads_are_open_and_delete_cancels_one() {
    let router = router();
    let mut locations = Vec::new();
    for _ in 0..64 {
        let (status, _, location, _) =
            send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
        assert_eq!(status, StatusCode::ACCEPTED);
        locations.push(location);
    }
    let (status, _, _, body) =
        send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "the 65th session");
    assert!(String::from_utf8_lossy(&body).contains("TOOMANYREQUESTS"));
    let (status, ..) = send(&router, Method::DELETE, &locations[0], b"").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, ..) = send(&router, Method::PATCH, &locations[0], b"x").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a cancelled session is gone");
    let (status, ..) = send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
    assert_eq!(status, StatusCode::ACCEPTED, "a session freed by DELETE");
}

/// Everything held (blobs, manifests, uploads in progress) is bounded: past it, 413 `DENIED`;
/// cancelling an upload frees its bytes.
#[tokio::test]
async fn everything_held_is_bounded_and_cancelling_frees_it() {
    let router = router_with(Limits {
        total: 1 << 20,
        ..Limits::default()
    });
    let (_, _, first, _) = send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
    let (status, ..) = send(&router, Method::PATCH, &first, &vec![0u8; 700 << 10]).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, _, second, _) = send(&router, Method::POST, "/v2/examples/a/blobs/uploads/", b"").await;
    let (status, _, _, body) = send(&router, Method::PATCH, &second, &vec![0u8; 400 << 10]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("DENIED"));
    let (status, ..) = send(
        &router,
        Method::PUT,
        "/v2/examples/a/manifests/dev",
        &vec![b' '; 400 << 10],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "manifests count too");
    send(&router, Method::DELETE, &first, b"").await;
    let (status, ..) = send(&router, Method::PATCH, &second, &vec![0u8; 400 << 10]).await;
    assert_eq!(status, StatusCode::ACCEPTED);
}
