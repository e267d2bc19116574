//! ServiceAccount tokens: the TokenRequest subresource
//! (`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`, what `kubectl create token`
//! calls) issues them, and each authenticates as `system:serviceaccount:{ns}:{name}` while it is
//! unexpired and its ServiceAccount still exists with the same uid.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::UserInfo;
use crate::error::ApiError;
use crate::store::Store;
use crate::util::{base64, now_rfc3339, rfc3339};

/// The audience a token gets when the request names none (the test control plane's issuer).
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// `spec.expirationSeconds` when the request sets none (upstream's default).
const DEFAULT_EXPIRATION_SECONDS: u64 = 3600;
/// Upstream's shortest token lifetime (10 minutes).
const MIN_EXPIRATION_SECONDS: u64 = 600;

/// The ServiceAccount a token was issued for.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    uid: String,
    /// Unix seconds.
    expires: u64,
}

/// The tokens issued so far (they live as long as the server).
#[derive(Debug, Default)]
pub struct Tokens {
    issued: Mutex<HashMap<String, Issued>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Base64url without padding (a JWT's encoding).
fn base64url(data: &[u8]) -> String {
    base64(data)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

impl Tokens {
    /// The user `token` authenticates as, if this server issued it, it has not expired and its
    /// ServiceAccount still exists with the uid it had.
    pub fn user(&self, store: &Store, token: &str) -> Option<UserInfo> {
        let issued = self
            .issued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(token)
            .cloned()?;
        if issued.expires <= now_secs() {
            return None;
        }
        let stored = store.get("serviceaccounts", &issued.namespace, &issued.name)?;
        let sa: Value = serde_json::from_slice(&stored.bytes).ok()?;
        (sa.pointer("/metadata/uid").and_then(Value::as_str) == Some(issued.uid.as_str()))
            .then(|| UserInfo::service_account(&issued.namespace, &issued.name, &issued.uid))
    }

    /// Serves a TokenRequest for ServiceAccount `namespace/name` with `body` (a TokenRequest,
    /// possibly empty; its fields are recorded as `manager`'s): the ServiceAccount must exist (404 otherwise), `expirationSeconds`
    /// defaults to 3600 and may not be under 600; the answer is the TokenRequest with
    /// `status.token` (JWT-shaped: its claims are readable; it is valid only on this server).
    ///
    /// # Errors
    /// 404 for a missing ServiceAccount, 422 for an invalid request, 400 for a body that is not
    /// JSON.
    pub fn request(
        &self,
        store: &Store,
        namespace: &str,
        name: &str,
        manager: &str,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        let mut req: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!(
                    "the TokenRequest body is not valid JSON: {e}; send a TokenRequest object \
                     (apiVersion authentication.k8s.io/v1)"
                ))
            })?
        };
        const KIND: &str = "TokenRequest.authentication.k8s.io";
        for (field, want) in [("name", name), ("namespace", namespace)] {
            let given = req
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !given.is_empty() && given != want {
                return Err(ApiError::invalid(
                    KIND,
                    name,
                    format!(
                        "metadata.{field}: Invalid value: \"{given}\": must match the service \
                         account {field} if specified"
                    ),
                ));
            }
        }
        let stored = store
            .get("serviceaccounts", namespace, name)
            .ok_or_else(|| ApiError::not_found("serviceaccounts", name))?;
        let sa: Value = serde_json::from_slice(&stored.bytes).unwrap_or_default();
        let uid = sa
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let expiration = match req.pointer("/spec/expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
            Some(v) => v.as_u64().ok_or_else(|| {
                ApiError::invalid(
                    KIND,
                    "",
                    format!(
                        "spec.expirationSeconds: Invalid value: {v}: may not specify a duration \
                         less than 10 minutes"
                    ),
                )
            })?,
        };
        if expiration < MIN_EXPIRATION_SECONDS {
            return Err(ApiError::invalid(
                KIND,
                "",
                format!(
                    "spec.expirationSeconds: Invalid value: {expiration}: may not specify a \
                     duration less than 10 minutes"
                ),
            ));
        }
        if expiration > 1 << 32 {
            return Err(ApiError::invalid(
                KIND,
                "",
                format!(
                    "spec.expirationSeconds: Invalid value: {expiration}: may not specify a \
                     duration larger than 2^32 seconds"
                ),
            ));
        }
        let audiences = match req.pointer("/spec/audiences").and_then(Value::as_array) {
            Some(a) if !a.is_empty() => Value::Array(a.clone()),
            _ => json!([DEFAULT_AUDIENCE]),
        };
        let now = now_secs();
        let expires = now + expiration;
        let claims = json!({
            "aud": audiences,
            "exp": expires,
            "iat": now,
            "iss": DEFAULT_AUDIENCE,
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
            "nbf": now,
            "sub": format!("{}{namespace}:{name}", super::SERVICE_ACCOUNT_PREFIX),
        });
        let signature: [u8; 32] = rand::random();
        let token = format!(
            "{}.{}.{}",
            base64url(br#"{"alg":"none","typ":"JWT"}"#),
            base64url(claims.to_string().as_bytes()),
            base64url(&signature)
        );
        self.issued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                token.clone(),
                Issued {
                    namespace: namespace.into(),
                    name: name.into(),
                    uid: uid.clone(),
                    expires,
                },
            );
        req["kind"] = json!("TokenRequest");
        req["apiVersion"] = json!("authentication.k8s.io/v1");
        // The sender's fields, before the server fills in its own.
        crate::patch::record_update(None, &mut req, manager, &now_rfc3339());
        let meta = crate::cluster::meta_mut(&mut req);
        meta.insert("name".into(), json!(name));
        meta.insert("namespace".into(), json!(namespace));
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        if !req.get("spec").is_some_and(Value::is_object) {
            req["spec"] = json!({});
        }
        req["spec"]["audiences"] = audiences;
        req["spec"]["expirationSeconds"] = json!(expiration);
        if req["spec"].get("boundObjectRef").is_none() {
            req["spec"]["boundObjectRef"] = Value::Null;
        }
        req["status"] = json!({"token": token, "expirationTimestamp": rfc3339(expires)});
        Ok(req)
    }
}
