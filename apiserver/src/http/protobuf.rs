//! Decoding of the Kubernetes protobuf envelope for the few kinds kubectl's imperative
//! commands create (`kubectl create namespace|configmap|secret|serviceaccount`) and the
//! requests of `kubectl create token` (TokenRequest) and `kubectl auth can-i` / `whoami`
//! (the access reviews, SelfSubjectReview).

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::util::base64;

/// The media type of protobuf bodies.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// One decoded field value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.pos)?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// The next (field number, value), `None` at the end; `Err` on malformed input.
    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ()> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint().ok_or(())?;
        let field = match key & 7 {
            0 => Field::Varint(self.varint().ok_or(())?),
            1 => {
                self.pos += 8;
                Field::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint().ok_or(())?).map_err(|_| ())?;
                let end = self
                    .pos
                    .checked_add(len)
                    .filter(|e| *e <= self.buf.len())
                    .ok_or(())?;
                let bytes = &self.buf[self.pos..end];
                self.pos = end;
                Field::Bytes(bytes)
            }
            5 => {
                self.pos += 4;
                Field::Fixed
            }
            _ => return Err(()),
        };
        if self.pos > self.buf.len() {
            return Err(());
        }
        Ok(Some((key >> 3, field)))
    }
}

fn text(bytes: &[u8]) -> Result<String, ()> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ())
}

/// A `map<string, string>` (or `map<string, bytes>` when `binary`) entry: key 1, value 2.
fn map_entry(bytes: &[u8], binary: bool) -> Result<(String, Value), ()> {
    let mut r = Reader::new(bytes);
    let (mut key, mut value) = (String::new(), Value::String(String::new()));
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(b)) => key = text(b)?,
            (2, Field::Bytes(b)) if binary => value = Value::String(base64(b)),
            (2, Field::Bytes(b)) => value = Value::String(text(b)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn insert_entry(
    obj: &mut Map<String, Value>,
    field: &str,
    bytes: &[u8],
    binary: bool,
) -> Result<(), ()> {
    let (k, v) = map_entry(bytes, binary)?;
    obj.entry(field)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(())?
        .insert(k, v);
    Ok(())
}

/// `ObjectMeta`: name 1, generateName 2, namespace 3, labels 11, annotations 12, finalizers 14.
fn object_meta(bytes: &[u8]) -> Result<Value, ()> {
    let mut meta = Map::new();
    let mut r = Reader::new(bytes);
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1..=3, Field::Bytes(b)) if !b.is_empty() => {
                let key = ["name", "generateName", "namespace"][(n - 1) as usize];
                meta.insert(key.into(), text(b)?.into());
            }
            (11, Field::Bytes(b)) => insert_entry(&mut meta, "labels", b, false)?,
            (12, Field::Bytes(b)) => insert_entry(&mut meta, "annotations", b, false)?,
            (14, Field::Bytes(b)) => meta
                .entry("finalizers")
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .ok_or(())?
                .push(text(b)?.into()),
            _ => {}
        }
    }
    Ok(Value::Object(meta))
}

/// The kind-specific fields of the supported kinds.
fn object(kind: &str, raw: &[u8]) -> Result<Map<String, Value>, ()> {
    let mut obj = Map::new();
    let mut r = Reader::new(raw);
    while let Some((n, f)) = r.next()? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(b)) => drop(obj.insert("metadata".into(), object_meta(b)?)),
            ("ConfigMap", 2, Field::Bytes(b)) => insert_entry(&mut obj, "data", b, false)?,
            ("ConfigMap", 3, Field::Bytes(b)) => insert_entry(&mut obj, "binaryData", b, true)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), (v != 0).into());
            }
            ("Secret", 2, Field::Bytes(b)) => insert_entry(&mut obj, "data", b, true)?,
            ("Secret", 3, Field::Bytes(b)) if !b.is_empty() => {
                obj.insert("type".into(), text(b)?.into());
            }
            ("Secret", 4, Field::Bytes(b)) => insert_entry(&mut obj, "stringData", b, false)?,
            ("TokenRequest", 2, Field::Bytes(b)) => drop(obj.insert("spec".into(), token_spec(b)?)),
            (
                "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview",
                2,
                Field::Bytes(b),
            ) => drop(obj.insert("spec".into(), access_spec(b)?)),
            ("SelfSubjectRulesReview", 2, Field::Bytes(b)) => {
                let spec = strings(b, &[(1, "namespace")], &[])?;
                obj.insert("spec".into(), spec);
            }
            _ => {}
        }
    }
    Ok(obj)
}

/// The string fields (`single`) and repeated string fields (`repeated`) of a message, by number.
fn strings(bytes: &[u8], single: &[(u64, &str)], repeated: &[(u64, &str)]) -> Result<Value, ()> {
    let mut out = Map::new();
    let mut r = Reader::new(bytes);
    while let Some((n, f)) = r.next()? {
        let Field::Bytes(b) = f else { continue };
        if let Some((_, name)) = single.iter().find(|(k, _)| *k == n) {
            out.insert((*name).into(), text(b)?.into());
        } else if let Some((_, name)) = repeated.iter().find(|(k, _)| *k == n) {
            let list = out.entry(*name).or_insert_with(|| json!([]));
            if let Some(list) = list.as_array_mut() {
                list.push(text(b)?.into());
            }
        }
    }
    Ok(Value::Object(out))
}

/// `TokenRequestSpec`: audiences (1), boundObjectRef (3), expirationSeconds (4).
fn token_spec(bytes: &[u8]) -> Result<Value, ()> {
    let mut spec = Map::new();
    let mut r = Reader::new(bytes);
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(b)) => {
                let list = spec.entry("audiences").or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.push(text(b)?.into());
                }
            }
            (3, Field::Bytes(b)) => {
                let fields = [(1, "kind"), (2, "apiVersion"), (3, "name"), (4, "uid")];
                spec.insert("boundObjectRef".into(), strings(b, &fields, &[])?);
            }
            (4, Field::Varint(v)) => drop(spec.insert("expirationSeconds".into(), v.into())),
            _ => {}
        }
    }
    Ok(Value::Object(spec))
}

/// `SubjectAccessReviewSpec` (and the self and local forms): resourceAttributes (1),
/// nonResourceAttributes (2), user (3), groups (4), uid (6).
fn access_spec(bytes: &[u8]) -> Result<Value, ()> {
    let mut spec = strings(bytes, &[(3, "user"), (6, "uid")], &[(4, "groups")])?;
    let mut r = Reader::new(bytes);
    while let Some((n, f)) = r.next()? {
        match (n, f) {
            (1, Field::Bytes(b)) => {
                let fields = [
                    (1, "namespace"),
                    (2, "verb"),
                    (3, "group"),
                    (4, "version"),
                    (5, "resource"),
                    (6, "subresource"),
                    (7, "name"),
                ];
                spec["resourceAttributes"] = strings(b, &fields, &[])?;
            }
            (2, Field::Bytes(b)) => {
                spec["nonResourceAttributes"] = strings(b, &[(1, "path"), (2, "verb")], &[])?;
            }
            _ => {}
        }
    }
    Ok(spec)
}

/// Decodes a protobuf request body (`k8s\0` + `runtime.Unknown`) into the JSON object.
///
/// # Errors
/// 415 UnsupportedMediaType for kinds other than Namespace, ConfigMap, Secret, ServiceAccount,
/// TokenRequest and the reviews; 400 BadRequest for a malformed body.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let malformed = || ApiError::BadRequest("the protobuf request body is malformed".into());
    let envelope = body.strip_prefix(b"k8s\0").ok_or_else(malformed)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut r = Reader::new(envelope);
    while let Some((n, f)) = r.next().map_err(|()| malformed())? {
        match (n, f) {
            (1, Field::Bytes(type_meta)) => {
                let mut t = Reader::new(type_meta);
                while let Some((n, f)) = t.next().map_err(|()| malformed())? {
                    match (n, f) {
                        (1, Field::Bytes(b)) => api_version = text(b).map_err(|()| malformed())?,
                        (2, Field::Bytes(b)) => kind = text(b).map_err(|()| malformed())?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    if !matches!(
        kind.as_str(),
        "Namespace"
            | "ConfigMap"
            | "Secret"
            | "ServiceAccount"
            | "TokenRequest"
            | "SelfSubjectAccessReview"
            | "SubjectAccessReview"
            | "LocalSubjectAccessReview"
            | "SelfSubjectRulesReview"
            | "SelfSubjectReview"
    ) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "this server decodes protobuf bodies only for Namespace, ConfigMap, Secret, \
             ServiceAccount, TokenRequest and the access reviews, not {kind}; send JSON instead \
             (e.g. `kubectl apply -f` or `kubectl create -f` with a manifest)"
        )));
    }
    let mut obj = object(&kind, raw).map_err(|()| malformed())?;
    obj.insert("apiVersion".into(), api_version.into());
    obj.insert("kind".into(), kind.into());
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(n << 3) | 2, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn configmap_envelope_decodes_to_json() {
        let meta = [
            field(1, b"cm"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let obj = decode(&body).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cm", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn a_token_request_and_an_access_review_decode_to_json() {
        let spec = [field(1, b"api"), vec![4 << 3, 100]].concat();
        let raw = field(2, &spec);
        let type_meta = [
            field(1, b"authentication.k8s.io/v1"),
            field(2, b"TokenRequest"),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap()["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 100})
        );
        let attributes = [field(1, b"default"), field(2, b"get"), field(5, b"pods")].concat();
        let raw = field(2, &field(1, &attributes));
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap()["spec"],
            json!({"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}})
        );
    }

    #[test]
    fn other_kinds_are_refused_with_415() {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta)].concat();
        assert_eq!(decode(&body).unwrap_err().code(), 415);
        assert_eq!(decode(b"nope").unwrap_err().code(), 400);
    }
}
