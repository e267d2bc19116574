//! How the fidelity suite compares two answers: values that differ on every server by nature
//! (uids, timestamps, resourceVersions, continue tokens, generateName suffixes) are normalised,
//! then the status code, content type and body are compared field by field.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::transport::Reply;

/// One field whose value differs; `None` means absent on that server.
#[derive(Debug, Clone)]
pub struct Difference {
    /// Where: `code`, `content-type`, `warnings` (the `Warning` headers), or `body.` and the
    /// field path (`items[name].data.k`).
    pub path: String,
    pub real: Option<Value>,
    pub embedded: Option<Value>,
}

/// How a step's answers are compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Status code, content type and every field of the body.
    #[default]
    Full,
    /// Status code, content type and the body's shape: every scalar replaced by its type.
    Shape,
    /// Status code and content type only.
    Code,
}

/// The differences between the real server's answer and the embedded one's. `select` (JSON
/// pointers) limits the body comparison to those parts.
pub fn compare(real: &Reply, embedded: &Reply, mode: Mode, select: &[String]) -> Vec<Difference> {
    let mut out = Vec::new();
    if real.code != embedded.code {
        out.push(Difference {
            path: "code".into(),
            real: Some(real.code.into()),
            embedded: Some(embedded.code.into()),
        });
    }
    let media = |r: &Reply| {
        r.content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    };
    if media(real) != media(embedded) {
        out.push(Difference {
            path: "content-type".into(),
            real: Some(real.content_type.clone().into()),
            embedded: Some(embedded.content_type.clone().into()),
        });
    }
    if mode == Mode::Code {
        return out;
    }
    if real.warnings != embedded.warnings {
        out.push(Difference {
            path: "warnings".into(),
            real: Some(real.warnings.clone().into()),
            embedded: Some(embedded.warnings.clone().into()),
        });
    }
    let prepare = |body: &Value| {
        let mut body = body.clone();
        normalise(&mut body);
        order_invalid_causes(&mut body);
        if mode == Mode::Shape {
            body = shape(&body);
        }
        body
    };
    let (real_body, embedded_body) = (prepare(&real.body), prepare(&embedded.body));
    if select.is_empty() {
        diff("body", Some(&real_body), Some(&embedded_body), &mut out);
    } else {
        for pointer in select {
            diff(
                &format!("body{pointer}"),
                real_body.pointer(pointer),
                embedded_body.pointer(pointer),
                &mut out,
            );
        }
    }
    out
}

/// Replaces what differs between any two servers by nature with placeholders.
pub fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let generate_name = map
                .get("generateName")
                .and_then(Value::as_str)
                .map(str::to_owned);
            for (key, field) in map.iter_mut() {
                match (key.as_str(), &*field) {
                    ("uid", Value::String(_)) => *field = "<uid>".into(),
                    ("resourceVersion", Value::String(s)) if !s.is_empty() => {
                        *field = "<rv>".into();
                    }
                    ("continue", Value::String(s)) if !s.is_empty() => {
                        *field = "<continue>".into();
                    }
                    ("cells", Value::Array(_)) => {
                        // A Table row's age ("0s", "1s"): the two servers answer a moment apart.
                        if let Value::Array(cells) = field {
                            for cell in cells.iter_mut() {
                                if cell.as_str().is_some_and(is_short_age) {
                                    *cell = "<age>".into();
                                } else {
                                    normalise(cell);
                                }
                            }
                        }
                    }
                    ("name", Value::String(name)) if generate_name.is_some() => {
                        // A server keeps at most 58 characters of the prefix (upstream's
                        // maxGeneratedNameLength), so a generated name is at most 63.
                        let whole = generate_name.as_deref().unwrap_or_default();
                        let prefix = whole.get(..58).unwrap_or(whole);
                        if name.starts_with(prefix) && name.len() == prefix.len() + 5 {
                            *field = format!("{prefix}<suffix>").into();
                        }
                    }
                    _ => normalise(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::String(text) => {
            if is_timestamp(text) {
                *text = "<time>".into();
            } else {
                *text = mask_in_text(text);
            }
        }
        _ => {}
    }
}

/// Puts the causes of an `Invalid` Status in one order: upstream validates a custom resource's
/// properties in Go's map order, which differs from run to run, so its causes, and the list in
/// its message, come in any order.
fn order_invalid_causes(body: &mut Value) {
    if body["kind"] != "Status" || body["reason"] != "Invalid" {
        return;
    }
    if let Some(Value::Array(causes)) = body.pointer_mut("/details/causes") {
        causes.sort_by_key(Value::to_string);
    }
    if let Some(Value::String(message)) = body.get_mut("message") {
        *message = sorted_error_list(message);
    }
}

/// `<head>[a: x, b: y]` with the bracketed errors sorted; an error starts after `, ` where a field
/// path and `: ` follow (an error's own text may hold `, `).
fn sorted_error_list(message: &str) -> String {
    let (Some(open), true) = (message.find(": ["), message.ends_with(']')) else {
        return message.to_owned();
    };
    let list = &message[open + 3..message.len() - 1];
    let starts_error = |rest: &str| {
        rest.split_once(": ").is_some_and(|(path, _)| {
            !path.is_empty()
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-[]<>".contains(c))
        })
    };
    let mut errors = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(found) = list[search..].find(", ") {
        let at = search + found;
        if starts_error(&list[at + 2..]) {
            errors.push(&list[start..at]);
            start = at + 2;
        }
        search = at + 2;
    }
    errors.push(&list[start..]);
    errors.sort_unstable();
    format!("{}: [{}]", &message[..open], errors.join(", "))
}

/// An age of seconds as a Table cell prints it (`0s` to `119s`).
fn is_short_age(text: &str) -> bool {
    text.strip_suffix('s')
        .is_some_and(|n| !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// RFC 3339 date-times (`2026-11-25T00:36:41Z`, with fractions or an offset).
fn is_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| range.clone().all(|i| b[i].is_ascii_digit());
    b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && (text.ends_with('Z') || text.len() >= 25)
}

/// In free text (messages): uuids become `<uid>` and numbers of three or more digits `<n>`
/// (resourceVersions and sizes in messages; both servers' numbers are masked alike).
fn mask_in_text(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if is_uuid_at(&chars, i) {
            out.push_str("<uid>");
            i += 36;
            continue;
        }
        if chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_ascii_alphanumeric()) {
            let end = (i..chars.len())
                .find(|&j| !chars[j].is_ascii_digit())
                .unwrap_or(chars.len());
            let boundary = end == chars.len() || !chars[end].is_ascii_alphabetic();
            if end - i >= 3 && boundary {
                out.push_str("<n>");
                i = end;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

fn is_uuid_at(chars: &[char], at: usize) -> bool {
    if at + 36 > chars.len() {
        return false;
    }
    chars[at..at + 36].iter().enumerate().all(|(i, c)| {
        if [8, 13, 18, 23].contains(&i) {
            *c == '-'
        } else {
            c.is_ascii_hexdigit()
        }
    })
}

/// The value with every scalar replaced by its type name and every list by its first element's
/// shape (lists keyed by name keep their keys).
fn shape(value: &Value) -> Value {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) if keyed(items).is_some() => {
            Value::Array(items.iter().map(shape_keeping_key).collect())
        }
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
    }
}

fn shape_keeping_key(item: &Value) -> Value {
    let mut shaped = shape(item);
    if let (Value::Object(out), Value::Object(original)) = (&mut shaped, item) {
        for key in [
            "name",
            "resource",
            "type",
            "group",
            "version",
            "manager",
            "operation",
        ] {
            if let Some(v) = original.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        if let Some(name) = item.pointer("/metadata/name") {
            out.insert("metadata".into(), serde_json::json!({"name": name}));
        }
    }
    shaped
}

/// The key each element of a list of objects is known by, when every element has a distinct
/// one: `metadata.name`, `name`, `resource`, `manager/operation`, `type`, `reason+field`.
fn keyed(items: &[Value]) -> Option<Vec<String>> {
    type KeyOf = fn(&Map<String, Value>) -> Option<String>;
    let candidates: [KeyOf; 6] = [
        |m| {
            m.get("metadata")
                .and_then(|md| md.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        },
        |m| m.get("name").and_then(Value::as_str).map(str::to_owned),
        |m| m.get("resource").and_then(Value::as_str).map(str::to_owned),
        |m| {
            let manager = m.get("manager")?.as_str()?;
            let operation = m.get("operation")?.as_str()?;
            let sub = m.get("subresource").and_then(Value::as_str).unwrap_or("");
            Some(format!(
                "{manager}/{operation}{}{sub}",
                if sub.is_empty() { "" } else { "/" }
            ))
        },
        |m| m.get("type").and_then(Value::as_str).map(str::to_owned),
        |m| {
            let reason = m.get("reason")?.as_str()?;
            let field = m.get("field").and_then(Value::as_str).unwrap_or("");
            Some(format!("{reason}:{field}"))
        },
    ];
    if items.is_empty() || !items.iter().all(Value::is_object) {
        return None;
    }
    candidates.iter().find_map(|key_of| {
        let keys: Option<Vec<String>> = items
            .iter()
            .map(|item| item.as_object().and_then(key_of))
            .collect();
        let keys = keys?;
        let mut unique = keys.clone();
        unique.sort();
        unique.dedup();
        (unique.len() == keys.len()).then_some(keys)
    })
}

/// Appends the differences between `real` and `embedded` at `path`.
fn diff(path: &str, real: Option<&Value>, embedded: Option<&Value>, out: &mut Vec<Difference>) {
    match (real, embedded) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                diff(&format!("{path}.{key}"), a.get(key), b.get(key), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => match (keyed(a), keyed(b)) {
            (Some(ka), Some(kb)) => {
                let by_key = |items: &[Value], keys: Vec<String>| -> BTreeMap<String, Value> {
                    keys.into_iter().zip(items.iter().cloned()).collect()
                };
                let (ma, mb) = (by_key(a, ka), by_key(b, kb));
                let keys: std::collections::BTreeSet<&String> =
                    ma.keys().chain(mb.keys()).collect();
                for key in keys {
                    diff(&format!("{path}[{key}]"), ma.get(key), mb.get(key), out);
                }
            }
            _ => {
                for i in 0..a.len().max(b.len()) {
                    diff(&format!("{path}[{i}]"), a.get(i), b.get(i), out);
                }
            }
        },
        (a, b) if a == b => {}
        (a, b) => out.push(Difference {
            path: path.to_owned(),
            real: a.cloned(),
            embedded: b.cloned(),
        }),
    }
}

/// `*` matches any run of characters, `{a,b}` either alternative; everything else matches
/// itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    if let Some(open) = pattern.find('{')
        && let Some(close) = pattern[open..].find('}').map(|i| open + i)
    {
        let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
        return pattern[open + 1..close]
            .split(',')
            .any(|alternative| glob(&format!("{head}{alternative}{tail}"), text));
    }
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_uids_versions_and_suffixes_are_normalised() {
        let mut v = json!({"metadata": {"uid": "x", "resourceVersion": "12",
            "creationTimestamp": "2026-11-25T00:36:41Z", "generateName": "a-", "name": "a-x7k2p"},
            "message": "too old resource version: 5 (1234) for 0b8a3f2e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"});
        normalise(&mut v);
        assert_eq!(
            v,
            json!({"metadata": {"uid": "<uid>", "resourceVersion": "<rv>",
            "creationTimestamp": "<time>", "generateName": "a-", "name": "a-<suffix>"},
            "message": "too old resource version: 5 (<n>) for <uid>"})
        );
    }

    #[test]
    fn lists_of_named_objects_are_compared_by_name() {
        let real = Reply {
            code: 200,
            content_type: "application/json".into(),
            warnings: Vec::new(),
            body: json!({"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}),
        };
        let embedded = Reply {
            body: json!({"items": [{"metadata": {"name": "b"}}]}),
            ..real.clone()
        };
        let found = compare(&real, &embedded, Mode::Full, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "body.items[a]");
        assert!(found[0].embedded.is_none());
    }

    #[test]
    fn the_causes_of_an_invalid_status_are_compared_in_one_order() {
        let message = |list: &str| {
            json!({"kind": "Status", "reason": "Invalid",
                "message": format!("G \"h\" is invalid: [{list}]"),
                "details": {"causes": [{"field": "b"}, {"field": "a"}]}})
        };
        let mut real = message(
            "spec.b: Unsupported value: \"x\": supported values: \"p\", \"q\", spec.a: Required value",
        );
        let mut embedded = message(
            "spec.a: Required value, spec.b: Unsupported value: \"x\": supported values: \"p\", \"q\"",
        );
        order_invalid_causes(&mut real);
        order_invalid_causes(&mut embedded);
        assert_eq!(real, embedded);
        assert_eq!(real["details"]["causes"][0]["field"], "a");
        let mut other = json!({"kind": "Status", "reason": "Conflict", "message": "x: [b, a]"});
        let before = other.clone();
        order_invalid_causes(&mut other);
        assert_eq!(other, before);
    }

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob(
            "body.items[*].metadata.*",
            "body.items[a].metadata.uid"
        ));
        assert!(!glob("body.items[*].spec", "body.items[a].metadata"));
        assert!(glob("*", ""));
        assert!(glob("{get,list}-*", "list-exact"));
        assert!(!glob("{get,list}", "watch"));
    }
}
