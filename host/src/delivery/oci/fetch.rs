//! The GETs of a pull: manifests and layers fetched with bounded bodies, error answers read
//! for their HTTP status and OCI error codes only, and redirects followed by hand (a manifest
//! stays on the registry's origin; a layer may move to another host, then without credentials).
//!
//! # Guarantees
//! - A manifest is refused when it announces more than [`MAX_MANIFEST_BYTES`], or as soon as
//!   more than that has arrived; it is read in chunks, never whole first.
//! - An error answer (not 2xx) is read for at most [`MAX_ERROR_BODY_BYTES`] and
//!   [`ERROR_BODY_TIME`]; only its status and its `errors[].code`s reach an error: a registry's
//!   text is never reflected into the host's errors or logs.
//! - At most [`MAX_REDIRECTS`] redirects; none from HTTPS to plain HTTP; credentials go only to
//!   the registry's own origin.

use std::time::Duration;

use http::HeaderValue;
use http::header::{ACCEPT, AUTHORIZATION, LOCATION};
use reqwest::{Response, StatusCode, Url};

use super::OciError;
use super::error::transport;

/// The largest manifest accepted.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// How much of an error answer's body is read, for its error codes.
pub const MAX_ERROR_BODY_BYTES: usize = 4 << 10;
/// How long an error answer's body may take to arrive.
pub const ERROR_BODY_TIME: Duration = Duration::from_secs(10);
/// How many redirects one GET follows.
pub const MAX_REDIRECTS: usize = 5;
/// The most error codes kept from one answer.
const MAX_CODES: usize = 8;

/// What is fetched: it decides where a redirect may lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum What {
    /// A manifest: served by the registry itself (its digest is what was asked for, and the
    /// credentials apply there).
    Manifest,
    /// A layer (a blob): registries send these to a CDN; the bytes are verified by digest.
    Layer,
}

impl What {
    fn name(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::Layer => "layer",
        }
    }
}

/// The GETs of one pull: the registry, the reference (for errors) and the credentials for the
/// registry's origin.
pub(super) struct Fetch<'a> {
    pub http: &'a reqwest::Client,
    pub registry: &'a str,
    pub reference: &'a str,
    /// The `Authorization` header for the registry's origin, if any.
    pub authorization: Option<HeaderValue>,
}

impl Fetch<'_> {
    /// The manifest at `url`, at most [`MAX_MANIFEST_BYTES`].
    pub async fn manifest(&self, url: Url, accept: &str) -> Result<Vec<u8>, OciError> {
        let mut response = self.get(url, What::Manifest, Some(accept)).await?;
        let too_large = |size: u64| OciError::ManifestTooLarge {
            registry: self.registry.to_owned(),
            reference: self.reference.to_owned(),
            size,
            limit: MAX_MANIFEST_BYTES,
        };
        if let Some(length) = response.content_length()
            && length > MAX_MANIFEST_BYTES
        {
            return Err(too_large(length));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.transport(error))?
        {
            let size = (body.len() + chunk.len()) as u64;
            if size > MAX_MANIFEST_BYTES {
                return Err(too_large(size));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The answer for the layer at `url`, its body unread: the caller streams it with its own
    /// bound.
    pub async fn layer(&self, url: Url) -> Result<Response, OciError> {
        self.get(url, What::Layer, None).await
    }

    /// A transport failure (TLS or unreachable) of this pull.
    pub fn transport(&self, error: reqwest::Error) -> OciError {
        transport(self.registry.to_owned(), self.reference.to_owned(), error)
    }

    /// GETs `url`, following at most [`MAX_REDIRECTS`] redirects as `what` allows; a 2xx answer.
    async fn get(&self, url: Url, what: What, accept: Option<&str>) -> Result<Response, OciError> {
        let origin = url.origin();
        let mut url = url;
        let mut credentials = true;
        for hop in 0..=MAX_REDIRECTS {
            let mut request = self.http.get(url.clone());
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if credentials && let Some(authorization) = &self.authorization {
                request = request.header(AUTHORIZATION, authorization.clone());
            }
            let response = request
                .send()
                .await
                .map_err(|error| self.transport(error))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if !status.is_redirection() || status == StatusCode::NOT_MODIFIED {
                return Err(self.answer(what, &url, response).await);
            }
            if hop == MAX_REDIRECTS {
                return Err(self.redirect(
                    what,
                    format!("more than {MAX_REDIRECTS} redirects, the last to {url}"),
                ));
            }
            let next = response
                .headers()
                .get(LOCATION)
                .and_then(|location| location.to_str().ok())
                .and_then(|location| url.join(location).ok())
                .ok_or_else(|| {
                    self.redirect(what, format!("HTTP {status} without a usable Location"))
                })?;
            if !matches!(next.scheme(), "http" | "https") {
                return Err(
                    self.redirect(what, format!("a redirect to scheme `{}`", next.scheme()))
                );
            }
            if url.scheme() == "https" && next.scheme() == "http" {
                return Err(self.redirect(
                    what,
                    format!(
                        "a redirect from HTTPS ({}) to plain HTTP ({})",
                        url.origin().ascii_serialization(),
                        next.origin().ascii_serialization()
                    ),
                ));
            }
            if next.origin() != origin {
                match what {
                    What::Manifest => {
                        return Err(self.redirect(
                            what,
                            format!(
                                "a redirect from {} to another origin, {}: a manifest is served \
                                 by the registry itself, where its credentials apply",
                                origin.ascii_serialization(),
                                next.origin().ascii_serialization()
                            ),
                        ));
                    }
                    // A CDN gets no credentials; the layer's digest vouches for its bytes.
                    What::Layer => credentials = false,
                }
            }
            url = next;
        }
        unreachable!("the loop returns at its last hop")
    }

    fn redirect(&self, what: What, problem: String) -> OciError {
        OciError::Redirect {
            registry: self.registry.to_owned(),
            reference: self.reference.to_owned(),
            what: what.name(),
            problem,
        }
    }

    /// An error answer: its status and error codes, its body read within bounds.
    async fn answer(&self, what: What, url: &Url, response: Response) -> OciError {
        let status = response.status();
        let codes = error_codes(response).await;
        let detail = format!(
            "HTTP {} for the {} at {}{}",
            status.as_u16(),
            what.name(),
            url.path(),
            if codes.is_empty() {
                String::new()
            } else {
                format!(", error codes {}", codes.join(", "))
            }
        );
        OciError::from_answer(
            self.registry,
            self.reference,
            status.as_u16(),
            &codes,
            detail,
        )
    }
}

/// The `errors[].code`s of an error answer: at most [`MAX_ERROR_BODY_BYTES`] of its body read
/// within [`ERROR_BODY_TIME`]; codes that are not 1–64 capitals, digits and `_` are dropped.
async fn error_codes(mut response: Response) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: String,
    }
    let mut body = Vec::new();
    let read = async {
        while body.len() < MAX_ERROR_BODY_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = MAX_ERROR_BODY_BYTES - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                Ok(None) | Err(_) => break,
            }
        }
    };
    let _ = tokio::time::timeout(ERROR_BODY_TIME, read).await;
    let Ok(envelope) = serde_json::from_slice::<Envelope>(&body) else {
        return Vec::new();
    };
    envelope
        .errors
        .into_iter()
        .map(|entry| entry.code)
        .filter(|code| {
            (1..=64).contains(&code.len())
                && code
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        })
        .take(MAX_CODES)
        .collect()
}
