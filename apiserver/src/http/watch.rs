//! Watch streams: initial state or history replay from a resourceVersion, live events, 410 Gone
//! as an ERROR event, bookmarks, `timeoutSeconds`, and the fault-injection close.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

use super::list::Filter;
use super::request::{App, Query, Target, is_true};
use super::response::{json_response, render, wants_metadata, wants_table};
use super::table;
use crate::error::ApiError;
use crate::store::{Event, EventType};

/// Encoded events buffered per watch before the writer waits for the client.
const WATCH_CHANNEL_CAPACITY: usize = 256;
/// Watch length when the client gives no `timeoutSeconds`.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

struct Encoder {
    table_mode: bool,
    columns_sent: bool,
    metadata_only: bool,
    form: table::Form,
    res: Arc<crate::resources::Resource>,
}

impl Encoder {
    fn event(&mut self, kind: &str, object: &Bytes) -> Bytes {
        let object = &render(&self.res, self.metadata_only, object.clone());
        let object = if self.table_mode {
            let first = !self.columns_sent;
            self.columns_sent = true;
            table::table(
                &self.res,
                std::slice::from_ref(object),
                0,
                None,
                first,
                self.form,
            )
        } else {
            object.clone()
        };
        event_line(kind, &object)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, api_version) = if self.metadata_only {
            (
                "PartialObjectMetadata".to_string(),
                "meta.k8s.io/v1".to_string(),
            )
        } else {
            (self.res.kind.clone(), self.res.api_version())
        };
        let object = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
        event_line("BOOKMARK", object.to_string().as_bytes())
    }
}

/// One watch line, `{"type":…,"object":…}`, with `type` first as a real API server writes it
/// (clients decoding the adjacently tagged event then need not buffer the object).
fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + kind.len() + 24);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn error_event(err: &ApiError) -> Bytes {
    event_line("ERROR", err.status().to_string().as_bytes())
}

pub(super) fn watch(
    app: &Arc<App>,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let cluster = app.cluster.clone();
    let store = cluster.store.clone();
    let filter = Filter::from_query(query, &target.res)?;
    let bookmarks = is_true(query, "allowWatchBookmarks");
    // `sendInitialEvents` given: true sends the initial state whatever the version, false
    // never; not given: the initial state when no version (or "0") is asked for.
    let send_initial = query
        .get("sendInitialEvents")
        .map(|_| is_true(query, "sendInitialEvents"));
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(t.parse().map_err(|_| {
            ApiError::BadRequest(format!(
                "timeoutSeconds `{t}` is not a whole number of seconds"
            ))
        })?),
        None => DEFAULT_WATCH_TIMEOUT,
    };
    let from: Option<u64> = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(v) => Some(v.parse().map_err(|_| {
            ApiError::BadRequest(format!("resourceVersion `{v}` is not a valid version"))
        })?),
    };
    if let Some(requested) = from {
        let current = store.current_rv();
        if requested > current {
            return Err(ApiError::TooLargeResourceVersion { requested, current });
        }
    }
    let table_name = target.res.table();
    let ns = (!target.ns.is_empty()).then(|| target.ns.clone());
    let name = target.name.clone();
    let matches = move |ns_of: &str, bytes: &Bytes| -> bool {
        if ns.as_deref().is_some_and(|n| n != ns_of) {
            return false;
        }
        if name.is_some() || !filter.is_empty() {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
                return false;
            };
            if name
                .as_deref()
                .is_some_and(|n| v.pointer("/metadata/name").and_then(|x| x.as_str()) != Some(n))
            {
                return false;
            }
            return filter.keep_value(&v);
        }
        true
    };
    let mut encoder = Encoder {
        table_mode: wants_table(headers),
        metadata_only: wants_metadata(headers),
        form: table::Form::of(query, headers),
        columns_sent: false,
        res: target.res.clone(),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(WATCH_CHANNEL_CAPACITY);
    // Initial state (no version, "0", or sendInitialEvents) then everything after it.
    let (initial, start_rv) = if send_initial.unwrap_or(from.is_none()) {
        let ns = (!target.ns.is_empty()).then_some(target.ns.as_str());
        let page = store.list(&table_name, ns, None, 0, &|_| true);
        (Some(page.items), page.rv)
    } else {
        (None, from.unwrap_or_else(|| store.current_rv()))
    };
    let subscription = store.subscribe(Some(start_rv));
    let mut epoch = cluster.faults.watch_epoch();
    let shutdown = app.shutdown.clone();
    let bookmark_interval = cluster.config.bookmark_interval;
    tokio::spawn(async move {
        let (replay, mut events) = match subscription {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(error_event(&e)).await;
                return;
            }
        };
        let mut last_rv = start_rv;
        let mut told_rv = start_rv;
        let sent_initial = initial.is_some();
        for (key, bytes) in initial.into_iter().flatten() {
            if matches(&key.ns, &bytes) && tx.send(encoder.event("ADDED", &bytes)).await.is_err() {
                return;
            }
        }
        // Whenever the initial state was sent, a bookmark says where it ends (as upstream's
        // watch cache does for every watch it starts from a list).
        if sent_initial && bookmarks && tx.send(encoder.bookmark(start_rv, true)).await.is_err() {
            return;
        }
        for e in replay {
            last_rv = e.rv;
            match deliver(&tx, &mut encoder, &table_name, &e, &matches).await {
                None => return,
                Some(true) => told_rv = e.rv,
                Some(false) => {}
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                _ = epoch.changed() => break,
                () = tx.closed() => break,
                () = &mut deadline => {
                    // A last bookmark only when it tells the client something newer, as
                    // upstream's watch cache (a watch started at the current version ends
                    // without one).
                    let rv = store.bookmark_rv(&events).unwrap_or(last_rv);
                    if bookmarks && rv > told_rv {
                        let _ = tx.send(encoder.bookmark(rv, false)).await;
                    }
                    break;
                }
                _ = ticker.tick(), if bookmarks => {
                    if let Some(rv) = store.bookmark_rv(&events)
                        && rv > told_rv
                    {
                        told_rv = rv;
                        if tx.send(encoder.bookmark(rv, false)).await.is_err() {
                            break;
                        }
                    }
                }
                received = events.recv() => match received {
                    Ok(e) => {
                        last_rv = e.rv;
                        match deliver(&tx, &mut encoder, &table_name, &e, &matches).await {
                            None => break,
                            Some(true) => told_rv = e.rv,
                            Some(false) => {}
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(missed = n, "closing a watch that fell behind");
                        break;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    Ok(json_response(StatusCode::OK, Body::from_stream(stream)))
}

async fn deliver(
    tx: &mpsc::Sender<Bytes>,
    encoder: &mut Encoder,
    table: &Arc<str>,
    e: &Event,
    matches: &impl Fn(&str, &Bytes) -> bool,
) -> Option<bool> {
    if *e.table != **table {
        return Some(false);
    }
    let now = matches(&e.ns, &e.bytes);
    // A filtered watch sees an object entering its selection as ADDED and one leaving it as
    // DELETED, as a real server's watch cache reports them: the DELETED carries the object's
    // last state within the selection, at the change's resourceVersion.
    let before = e.prev.as_ref().map(|p| matches(&e.ns, p));
    let (kind, object) = match (e.kind, before, now) {
        (EventType::Added, _, true) => ("ADDED", e.bytes.clone()),
        (EventType::Modified, Some(true) | None, true) => ("MODIFIED", e.bytes.clone()),
        (EventType::Modified, Some(false), true) => ("ADDED", e.bytes.clone()),
        (EventType::Modified, Some(true), false) => (
            "DELETED",
            at_version(e.prev.as_ref().unwrap_or(&e.bytes), e.rv),
        ),
        (EventType::Deleted, _, true) => ("DELETED", e.bytes.clone()),
        _ => return Some(false),
    };
    tx.send(encoder.event(kind, &object))
        .await
        .ok()
        .map(|()| true)
}

/// `object` with its `metadata.resourceVersion` set to `rv` (unchanged if it is no JSON object).
fn at_version(object: &Bytes, rv: u64) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(object) else {
        return object.clone();
    };
    let Some(metadata) = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return object.clone();
    };
    metadata.insert("resourceVersion".into(), rv.to_string().into());
    serde_json::to_vec(&value).map_or_else(|_| object.clone(), Bytes::from)
}
