//! List: selectors, `limit`/`continue` pagination, resourceVersion semantics, and the list body.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::fields::{self, KindField};
use super::request::{App, Query, Target};
use super::response::{json_response, render, wants_metadata, wants_table};
use super::table;
use crate::error::ApiError;
use crate::resources::Resource;
use label_selector::LabelSelector;

use crate::field_selector::FieldSelector;
use crate::store::ObjKey;

/// Label and field selectors of a list, watch or deletecollection.
pub(crate) struct Filter {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
    kind_fields: Vec<KindField>,
}

impl Filter {
    pub(crate) fn from_query(query: &Query, res: &Resource) -> Result<Self, ApiError> {
        let labels = match query.get("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                // the message quotes the selector and names the offending token
                ApiError::BadRequest(format!("invalid labelSelector parameter: {e}"))
            })?),
            None => None,
        };
        let (generic, kind_fields) = match query.get("fieldSelector") {
            Some(s) => fields::split(res, s)?,
            None => (String::new(), Vec::new()),
        };
        let fields = match Some(generic).filter(|s| !s.is_empty()) {
            Some(s) => Some(FieldSelector::parse(&s).map_err(|e| {
                ApiError::BadRequest(format!("unable to parse fieldSelector `{s}`: {e}"))
            })?),
            None => None,
        };
        Ok(Filter {
            labels,
            fields,
            kind_fields,
        })
    }

    /// Whether the filter selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none() && self.kind_fields.is_empty()
    }

    /// Whether the serialized object matches.
    pub(crate) fn keep(&self, bytes: &[u8]) -> bool {
        if self.is_empty() {
            return true;
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => self.keep_value(&v),
            Err(_) => false,
        }
    }

    /// Whether the parsed object matches.
    pub(crate) fn keep_value(&self, v: &Value) -> bool {
        if let Some(l) = &self.labels {
            let labels = v.pointer("/metadata/labels").and_then(Value::as_object);
            let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            if !l.matches_by(label) {
                return false;
            }
        }
        self.fields.as_ref().is_none_or(|f| f.matches(v))
            && self.kind_fields.iter().all(|f| f.matches(v))
    }
}

/// Encodes a continue token: the version of the first page and the last key served.
fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = format!("{rv}\n{}\n{}", key.ns, key.name);
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Option<(u64, ObjKey)> {
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    let raw = String::from_utf8(bytes?).ok()?;
    let mut parts = raw.splitn(3, '\n');
    let rv = parts.next()?.parse().ok()?;
    Some((rv, ObjKey::new(parts.next()?, parts.next()?)))
}

/// The list body, built from stored bytes without re-encoding them.
pub(crate) fn list_body(
    res: &Resource,
    items: &[Bytes],
    rv: u64,
    cont: Option<String>,
    remaining: Option<usize>,
) -> Bytes {
    let mut out = Vec::with_capacity(items.iter().map(|b| b.len() + 1).sum::<usize>() + 256);
    let mut meta = serde_json::json!({"resourceVersion": rv.to_string()});
    match cont {
        Some(c) => meta["continue"] = c.into(),
        // Upstream's unstructured lists (custom resources) write an empty continue.
        None if res.crd.is_some() => meta["continue"] = "".into(),
        None => {}
    }
    if let Some(r) = remaining {
        meta["remainingItemCount"] = r.into();
    }
    out.extend_from_slice(
        format!(
            "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
            res.kind,
            res.api_version()
        )
        .as_bytes(),
    );
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if res.crd.is_some() {
            out.extend_from_slice(item);
        } else {
            out.extend_from_slice(&without_type_meta(item, &res.kind));
        }
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// A built-in object without its `apiVersion` and `kind`: a real API server leaves them out of
/// the items of a built-in kind's list (its typed list encoding carries them once, on the
/// list), while a custom resource's items keep them. Only the top level is parsed; nested values
/// are copied as they are. Other forms (`PartialObjectMetadata`) keep theirs.
fn without_type_meta(item: &[u8], kind: &str) -> Vec<u8> {
    type Fields<'a> = std::collections::BTreeMap<&'a str, &'a serde_json::value::RawValue>;
    match serde_json::from_slice::<Fields<'_>>(item) {
        Ok(mut fields) if fields.get("kind").map(|k| k.get()) == Some(&format!("\"{kind}\"")) => {
            fields.remove("apiVersion");
            fields.remove("kind");
            serde_json::to_vec(&fields).unwrap_or_else(|_| item.to_vec())
        }
        _ => item.to_vec(),
    }
}

/// Relabels a list body as a `PartialObjectMetadataList`.
fn metadata_list(list: Bytes) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(&list) else {
        return list;
    };
    v["kind"] = "PartialObjectMetadataList".into();
    v["apiVersion"] = "meta.k8s.io/v1".into();
    Bytes::from(v.to_string())
}

pub(super) fn list(
    app: &Arc<App>,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let store = &app.cluster.store;
    let res = &target.res;
    let filter = Filter::from_query(query, res)?;
    // As upstream, a limit of zero or below is no limit.
    let limit: usize = match query.get("limit") {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::BadRequest(format!("limit `{l}` is not an integer")))?
            .try_into()
            .unwrap_or(0),
        None => 0,
    };
    let mut after = None;
    let mut snapshot_rv = None;
    if let Some(token) = query.get("continue").filter(|t| !t.is_empty()) {
        let (rv, key) = decode_continue(token).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "the continue token `{token}` is malformed; start a new list without it"
            ))
        })?;
        store.check_window(rv).map_err(|_| {
            ApiError::Expired(
                "The provided continue parameter is too old to display a consistent list \
                 result. You can start a new list without the continue parameter."
                    .into(),
            )
        })?;
        after = Some(key);
        snapshot_rv = Some(rv);
    }
    let requested: Option<u64> = match query.get("resourceVersion").filter(|v| !v.is_empty()) {
        Some(v) => Some(v.parse().map_err(|_| {
            ApiError::BadRequest(format!("resourceVersion `{v}` is not a valid version"))
        })?),
        None => None,
    };
    if query.get("resourceVersionMatch").map(String::as_str) == Some("Exact")
        && let Some(rv) = requested
    {
        store.check_window(rv)?;
        let current = store.current_rv();
        if rv != current {
            return Err(ApiError::Gone(format!(
                "too old resource version: {rv} ({current}); this server serves exact lists \
                 only at its current version, list again without resourceVersion"
            )));
        }
    }
    let ns = (!target.ns.is_empty()).then_some(target.ns.as_str());
    let page = store.list(&res.table(), ns, after.as_ref(), limit, &|b: &Bytes| {
        filter.keep(b)
    });
    let rv = snapshot_rv.unwrap_or(page.rv);
    let cont = page.next.as_ref().map(|k| encode_continue(rv, k));
    // Upstream counts the remaining items only when no selector filters them.
    let selected = ["labelSelector", "fieldSelector"]
        .iter()
        .any(|p| query.get(*p).is_some_and(|v| !v.is_empty()));
    let remaining = (page.remaining > 0 && !selected).then_some(page.remaining);
    let metadata_only = wants_metadata(headers);
    let items: Vec<Bytes> = page
        .items
        .into_iter()
        .map(|(_, b)| render(res, metadata_only, b))
        .collect();
    let body = if wants_table(headers) {
        table::table(res, &items, rv, cont, true, table::Form::of(query, headers))
    } else {
        let list = list_body(res, &items, rv, cont, remaining);
        if metadata_only {
            metadata_list(list)
        } else {
            list
        }
    };
    Ok(json_response(StatusCode::OK, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trips() {
        let key = ObjKey::new("default", "a-b");
        let token = encode_continue(42, &key);
        assert_eq!(decode_continue(&token), Some((42, key)));
        assert_eq!(decode_continue("zz"), None);
    }
}
