//! Errors of the API server: request failures rendered as `metav1.Status`, and start failures.

use serde_json::{Value, json};

/// A request failure; every variant becomes a `metav1.Status` body with the matching HTTP code
/// and `reason`, as a real API server sends it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 404 NotFound: the object (or the resource type) does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The resource (plural, with group), e.g. `configmaps` or `deployments.apps`.
        resource: String,
        /// The object name, empty for a missing resource type.
        name: String,
    },
    /// 404 NotFound for a path that names no served resource.
    #[error("the server could not find the requested resource (path {0})")]
    NoRoute(String),
    /// 409 AlreadyExists: create of a name that is taken.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// The resource (plural, with group).
        resource: String,
        /// The object name.
        name: String,
    },
    /// 409 Conflict: a stale resourceVersion or a failed precondition.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {message}")]
    Conflict {
        /// The resource (plural, with group).
        resource: String,
        /// The object name.
        name: String,
        /// What conflicted and what to do.
        message: String,
    },
    /// 409 Conflict from server-side apply: fields owned by other managers.
    #[error("{message}")]
    FieldConflict {
        /// The resource (plural, with group).
        resource: String,
        /// The object name.
        name: String,
        /// The conflicts, and the fix (`force=true` or drop the fields).
        message: String,
        /// One `FieldManagerConflict` cause per field.
        causes: Vec<Value>,
    },
    /// 422 Invalid: the object fails validation.
    #[error("{kind} \"{name}\" is invalid: {}", aggregate(problems))]
    Invalid {
        /// The kind of the object.
        kind: String,
        /// The object name.
        name: String,
        /// Each failing field and why (`metadata.name: Invalid value: …`), one cause each.
        problems: Vec<String>,
    },
    /// 413 RequestEntityTooLarge: the request body is over the 3 MiB a real server reads.
    #[error("Request entity too large: {0}")]
    RequestEntityTooLarge(String),
    /// 400 BadRequest: the request itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 410 Gone: the requested resourceVersion is older than the history window.
    #[error("{0}")]
    Gone(String),
    /// 410 Gone with reason Expired (an expired continue token).
    #[error("{0}")]
    Expired(String),
    /// 429 TooManyRequests, with a `Retry-After` in seconds.
    #[error("{message}")]
    TooManyRequests {
        /// Why the request was refused.
        message: String,
        /// Seconds the client should wait.
        retry_after_secs: u64,
    },
    /// 401 Unauthorized: the request lacks the bearer token the server requires.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 Forbidden: e.g. creating in a terminating namespace.
    #[error("{0}")]
    Forbidden(String),
    /// 403 Forbidden naming the object, as upstream's `NewForbidden` (an immortal namespace).
    #[error("{resource} \"{name}\" is forbidden: {message}")]
    ForbiddenObject {
        /// The resource (plural, with group).
        resource: String,
        /// The object name.
        name: String,
        /// Why it is forbidden.
        message: String,
    },
    /// 403 Forbidden from the authorizer, as upstream's `ForbiddenStatusError`: the message
    /// names the user and what they may not do; the details name the resource and object.
    #[error("{message}")]
    Denied {
        /// The API group of the request, empty for core or a non-resource path.
        group: String,
        /// The resource (plural), empty for a non-resource path.
        resource: String,
        /// The object name, empty when none.
        name: String,
        /// The whole message.
        message: String,
    },
    /// 405 MethodNotAllowed: the verb is not served for this path.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 406 NotAcceptable: no form the client accepts fits the answer (a metadata list asked of
    /// one object, say).
    #[error("{0}")]
    NotAcceptable(String),
    /// 415 UnsupportedMediaType: a body or patch type the server does not read.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 500 InternalError.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 500 with no reason: what upstream answers for a storage error it does not classify
    /// (a create that carries a resourceVersion).
    #[error("{0}")]
    Unclassified(String),
    /// 503 ServiceUnavailable: the server cannot serve the request now (no `Retry-After`).
    #[error("{0}")]
    ServiceUnavailable(String),
    /// 504 Timeout: a watch or list asked for a resourceVersion newer than the server's (the
    /// client saw a server that has since lost its state).
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The version asked for.
        requested: u64,
        /// The server's current version.
        current: u64,
    },
}

impl ApiError {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } | ApiError::NoRoute(_) => 404,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::FieldConflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::RequestEntityTooLarge(_) => 413,
            ApiError::Gone(_) | ApiError::Expired(_) => 410,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::Unauthorized(_) => 401,
            ApiError::Forbidden(_) | ApiError::ForbiddenObject { .. } | ApiError::Denied { .. } => {
                403
            }
            ApiError::NotAcceptable(_) => 406,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Internal(_) | ApiError::Unclassified(_) => 500,
            ApiError::ServiceUnavailable(_) => 503,
            ApiError::TooLargeResourceVersion { .. } => 504,
        }
    }

    /// The `reason` field of the Status.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::NoRoute(_) => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::FieldConflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::RequestEntityTooLarge(_) => "RequestEntityTooLarge",
            ApiError::Gone(_) => "Gone",
            ApiError::Expired(_) => "Expired",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::Unauthorized(_) => "Unauthorized",
            ApiError::Forbidden(_) | ApiError::ForbiddenObject { .. } | ApiError::Denied { .. } => {
                "Forbidden"
            }
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Internal(_) => "InternalError",
            ApiError::Unclassified(_) => "",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::TooLargeResourceVersion { .. } => "Timeout",
        }
    }

    /// The `metav1.Status` body.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if self.reason().is_empty() {
            // Upstream's `StatusReasonUnknown` is the empty string, left out of the body.
            if let Some(o) = status.as_object_mut() {
                o.remove("reason");
            }
        }
        let details = match self {
            ApiError::NotFound { resource, name }
            | ApiError::AlreadyExists { resource, name }
            | ApiError::Conflict { resource, name, .. }
            | ApiError::ForbiddenObject { resource, name, .. } => Some(details(resource, name)),
            ApiError::FieldConflict {
                resource,
                name,
                causes,
                ..
            } => {
                // Upstream names neither the object nor its kind here, only the fields.
                let _ = (resource, name);
                Some(json!({"causes": causes}))
            }
            ApiError::Invalid {
                kind,
                name,
                problems,
            } => Some(invalid_details(kind, name, problems)),
            ApiError::TooManyRequests {
                retry_after_secs, ..
            } => Some(json!({"retryAfterSeconds": retry_after_secs})),
            ApiError::Denied {
                group,
                resource,
                name,
                ..
            } => {
                // Upstream's StatusDetails: every field `omitempty`, so a path is `{}`.
                let mut d = json!({});
                for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
                    if !value.is_empty() {
                        d[key] = json!(value);
                    }
                }
                Some(d)
            }
            ApiError::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge",
                            "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            _ => None,
        };
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }

    /// Shorthand for a NotFound.
    pub fn not_found(resource: &str, name: &str) -> Self {
        ApiError::NotFound {
            resource: resource.to_string(),
            name: name.to_string(),
        }
    }

    /// Shorthand for an Invalid with one cause.
    pub fn invalid(kind: &str, name: &str, message: impl Into<String>) -> Self {
        Self::invalid_all(kind, name, vec![message.into()])
    }

    /// An Invalid with one cause per problem, in order (upstream's field error list).
    pub fn invalid_all(kind: &str, name: &str, problems: Vec<String>) -> Self {
        ApiError::Invalid {
            kind: kind.to_string(),
            name: name.to_string(),
            problems,
        }
    }
}

/// Upstream's aggregate error text: one problem as is, several as `[a, b]`.
fn aggregate(problems: &[String]) -> String {
    match problems {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn details(resource: &str, name: &str) -> Value {
    let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
    // As upstream's `omitempty`: the core group is no `group` field at all.
    let mut details = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        details["group"] = group.into();
    }
    details
}

/// The details of a 422: the kind (`Deployment.apps` names group `apps`), the name when there is
/// one, and the cause in upstream's form, the field apart:
/// `metadata.name: Invalid value: "x": …` is field `metadata.name`, reason `FieldValueInvalid`,
/// message `Invalid value: "x": …` (`Required value` is `FieldValueRequired`, `Too long`
/// `FieldValueTooLong`, `Too many` `FieldValueTooMany`, `Forbidden` `FieldValueForbidden`, `Unsupported value`
/// `FieldValueNotSupported`).
fn invalid_details(kind: &str, name: &str, problems: &[String]) -> Value {
    let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
    // Upstream's `omitempty`: the review kinds name no kind (their decoded object has none).
    let mut details = json!({});
    if !kind.is_empty() {
        details["kind"] = kind.into();
    }
    if !name.is_empty() {
        details["name"] = name.into();
    }
    if !group.is_empty() {
        details["group"] = group.into();
    }
    let cause = |problem: &str| {
        // A field path has no space outside its `[key]` subscripts (`data[a b]` is one).
        let is_field = |field: &str| {
            let mut depth = 0_i32;
            !field.is_empty()
                && field.chars().all(|c| {
                    match c {
                        '[' => depth += 1,
                        ']' => depth -= 1,
                        _ => {}
                    }
                    c != ' ' || depth > 0
                })
        };
        let split = problem
            .match_indices(": ")
            .map(|(at, _)| (&problem[..at], &problem[at + 2..]))
            .find(|(field, _)| is_field(field));
        let Some((field, rest)) = split else {
            return json!({"reason": "FieldValueInvalid", "message": problem});
        };
        let reason = [
            ("Required value", "FieldValueRequired"),
            ("Too long", "FieldValueTooLong"),
            ("Too many", "FieldValueTooMany"),
            ("Forbidden", "FieldValueForbidden"),
            ("Unsupported value", "FieldValueNotSupported"),
            ("Duplicate value", "FieldValueDuplicate"),
        ]
        .iter()
        .find(|(prefix, _)| rest.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason);
        // A schema type error reads "Invalid value" too, with its own reason upstream.
        let reason = if rest.contains(" in body must be of type ") {
            "FieldValueTypeInvalid"
        } else {
            reason
        };
        json!({"reason": reason, "message": rest, "field": field})
    };
    details["causes"] = problems.iter().map(|p| cause(p.as_str())).collect();
    details
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener could not bind its address.
    #[error("failed to bind the {which} listener on {addr}; choose another address or port")]
    Bind {
        /// `HTTP` or `HTTPS`.
        which: &'static str,
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// The self-signed certificate could not be generated.
    #[error("failed to generate the self-signed serving certificate")]
    Certificate(#[source] rcgen::Error),
    /// The TLS configuration was refused by rustls.
    #[error("failed to build the TLS server configuration from the generated certificate")]
    Tls(#[source] rustls::Error),
}

/// Why a file (kubeconfig, CA) could not be written.
#[derive(Debug, thiserror::Error)]
#[error("failed to write {what} to {path}; check that the directory exists and is writable")]
pub struct WriteError {
    /// What was being written.
    pub what: &'static str,
    /// Where.
    pub path: std::path::PathBuf,
    /// The I/O failure.
    #[source]
    pub source: std::io::Error,
}

/// Why a kube client could not be built for this server.
#[derive(Debug, thiserror::Error)]
#[error("failed to build a kube client for the embedded API server at {url}")]
pub struct ClientError {
    /// The server URL.
    pub url: String,
    /// The kube failure.
    #[source]
    pub source: kube::Error,
}
