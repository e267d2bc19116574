//! [`Error`]: what a failed reconcile returns, with its chain of causes.

use std::error::Error as StdError;
use std::fmt;

use crate::bindings::ReconcileError;
use crate::bindings::kube::reconcile::types::{ApiStatus, CallError};

/// Why a reconcile (or one step of it) failed: a message, or a failed host call, or any other
/// error, wrapped in layers of context.
///
/// `{}` shows the outermost layer; `{:#}` shows the whole chain joined with `": "`, which is
/// what the host logs when a reconcile returns it:
/// `copying to team-a: failed to apply v1 ConfigMap team-a/settings: the API server refused the
/// call (409 Conflict): …`.
///
/// Build one with [`Error::msg`], with `?` from a [`CallError`] or a [`serde_json::Error`], with
/// [`Error::new`] from any other error, and add layers with [`Error::context`] or the
/// [`Context`] trait.
pub struct Error {
    repr: Repr,
}

enum Repr {
    Message(String),
    Call(CallError),
    Other(Box<dyn StdError + Send + Sync + 'static>),
    Context { context: String, cause: Box<Error> },
}

impl Error {
    /// An error that is just a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            repr: Repr::Message(message.to_string()),
        }
    }

    /// Wraps any other error, keeping its chain of sources. An [`Error`] stays itself and a
    /// [`CallError`] is described as [`Error::from`] describes it.
    pub fn new(error: impl StdError + Send + Sync + 'static) -> Self {
        let boxed: Box<dyn StdError + Send + Sync> = Box::new(error);
        let boxed = match boxed.downcast::<Self>() {
            Ok(error) => return *error,
            Err(other) => other,
        };
        match boxed.downcast::<CallError>() {
            Ok(call) => Self::from(*call),
            Err(other) => Self {
                repr: Repr::Other(other),
            },
        }
    }

    /// Wraps this error in a layer saying what was being done: `"failed to copy to team-a"`.
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            repr: Repr::Context {
                context: context.to_string(),
                cause: Box::new(self),
            },
        }
    }

    /// The failed host call at the root of this error, if it is one.
    #[must_use]
    pub fn call_error(&self) -> Option<&CallError> {
        match &self.repr {
            Repr::Call(error) => Some(error),
            Repr::Context { cause, .. } => cause.call_error(),
            Repr::Message(_) | Repr::Other(_) => None,
        }
    }

    /// The API server's status, if the API server refused the call at the root of this error.
    #[must_use]
    pub fn api_status(&self) -> Option<&ApiStatus> {
        match self.call_error() {
            Some(CallError::Api(status)) => Some(status),
            _ => None,
        }
    }

    /// Whether the API server answered 404: the object does not exist.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.api_status().is_some_and(|status| status.code == 404)
    }

    /// Whether the API server answered 409: the object exists already, or changed since it was
    /// read.
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        self.api_status().is_some_and(|status| status.code == 409)
    }

    /// Whether the manifest's grants refused the call (the API server was not contacted).
    #[must_use]
    pub fn is_denied(&self) -> bool {
        matches!(self.call_error(), Some(CallError::Denied(_)))
    }

    /// The messages of this error and its causes, outermost first.
    pub fn chain(&self) -> impl Iterator<Item = String> + '_ {
        let mut next: Option<&(dyn StdError + 'static)> = Some(self);
        std::iter::from_fn(move || {
            let error = next?;
            next = error.source();
            Some(error.to_string())
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            for (i, message) in self.chain().enumerate() {
                if i > 0 {
                    f.write_str(": ")?;
                }
                f.write_str(&message)?;
            }
            return Ok(());
        }
        match &self.repr {
            Repr::Message(message) => f.write_str(message),
            Repr::Call(error) => describe_call_error(error, f),
            Repr::Other(error) => error.fmt(f),
            Repr::Context { context, .. } => f.write_str(context),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.repr {
            Repr::Message(_) | Repr::Call(_) => None,
            Repr::Other(error) => error.source(),
            Repr::Context { cause, .. } => Some(&**cause),
        }
    }
}

/// Says what a failed host call means, in words (the generated `Display` is its `Debug`).
fn describe_call_error(error: &CallError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match error {
        CallError::Denied(message) => {
            write!(f, "the plugin may not make the call: {message}")
        }
        CallError::Invalid(message) => write!(f, "the host refused malformed arguments: {message}"),
        CallError::Api(status) => write!(
            f,
            "the API server refused the call ({} {}): {}",
            status.code, status.reason, status.message
        ),
        CallError::Unavailable(message) => {
            write!(f, "the API server could not be reached: {message}")
        }
    }
}

impl From<CallError> for Error {
    fn from(error: CallError) -> Self {
        Self {
            repr: Repr::Call(error),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Self::new(error)
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self::msg(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Self::msg(message)
    }
}

impl From<Error> for ReconcileError {
    /// The WIT `reconcile-error`, its message the whole chain of causes.
    fn from(error: Error) -> Self {
        Self {
            message: format!("{error:#}"),
        }
    }
}

/// Adds context to the error of a `Result` (or to a `None`), like `anyhow::Context`.
///
/// ```
/// use reconcile_guest::{Context, Error};
///
/// fn replicas(spec: &serde_json::Value) -> Result<u64, Error> {
///     spec.get("replicas")
///         .and_then(serde_json::Value::as_u64)
///         .context("spec.replicas is missing or not a number")
/// }
/// # assert!(replicas(&serde_json::json!({})).is_err());
/// ```
pub trait Context<T> {
    /// Wraps the error in `context`.
    ///
    /// # Errors
    ///
    /// The error (or, for an `Option`, a new error) wrapped in `context`.
    fn context(self, context: impl fmt::Display) -> Result<T, Error>;

    /// Wraps the error in the context `f` builds, only when there is an error.
    ///
    /// # Errors
    ///
    /// The error (or, for an `Option`, a new error) wrapped in the context.
    fn with_context<C: fmt::Display>(self, f: impl FnOnce() -> C) -> Result<T, Error>;
}

impl<T, E: StdError + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T, Error> {
        self.map_err(|error| Error::new(error).context(context))
    }

    fn with_context<C: fmt::Display>(self, f: impl FnOnce() -> C) -> Result<T, Error> {
        self.map_err(|error| Error::new(error).context(f()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl fmt::Display) -> Result<T, Error> {
        self.ok_or_else(|| Error::msg(context))
    }

    fn with_context<C: fmt::Display>(self, f: impl FnOnce() -> C) -> Result<T, Error> {
        self.ok_or_else(|| Error::msg(f()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict() -> CallError {
        CallError::Api(ApiStatus {
            code: 409,
            reason: "Conflict".into(),
            message: "the object has been modified".into(),
        })
    }

    #[test]
    fn alternate_display_joins_the_whole_chain_outermost_first() {
        let error = Error::from(conflict())
            .context("failed to apply v1 ConfigMap team-a/settings")
            .context("copying to team-a");
        assert_eq!(error.to_string(), "copying to team-a");
        assert_eq!(
            format!("{error:#}"),
            "copying to team-a: failed to apply v1 ConfigMap team-a/settings: \
             the API server refused the call (409 Conflict): the object has been modified"
        );
    }

    #[test]
    fn reconcile_error_carries_the_whole_chain() {
        let error = Error::msg("boom").context("step two");
        assert_eq!(ReconcileError::from(error).message, "step two: boom");
    }

    #[test]
    fn each_call_error_is_described_in_words() {
        let cases = [
            (
                CallError::Denied("no grant for get on v1 Secret".into()),
                "the plugin may not make the call: no grant for get on v1 Secret",
            ),
            (
                CallError::Invalid("missing metadata.name".into()),
                "the host refused malformed arguments: missing metadata.name",
            ),
            (
                CallError::Unavailable("timed out".into()),
                "the API server could not be reached: timed out",
            ),
        ];
        for (call_error, text) in cases {
            assert_eq!(Error::from(call_error).to_string(), text);
        }
    }

    #[test]
    fn call_error_is_found_under_context_layers() {
        let error = Error::from(conflict()).context("one").context("two");
        assert!(error.is_conflict());
        assert!(!error.is_not_found());
        assert!(!error.is_denied());
        assert_eq!(error.call_error(), Some(&conflict()));
        assert!(Error::msg("plain").call_error().is_none());
    }

    #[test]
    fn wrapped_errors_keep_their_text_once() {
        let json = serde_json::from_str::<u32>("\"x\"").unwrap_err();
        let expected = json.to_string();
        let error = Error::from(json).context("reading spec");
        assert_eq!(format!("{error:#}"), format!("reading spec: {expected}"));
        assert_eq!(error.chain().count(), 2);
    }

    #[test]
    fn new_keeps_an_error_and_describes_a_call_error() {
        let error = Error::new(Error::msg("inner").context("outer"));
        assert_eq!(format!("{error:#}"), "outer: inner");
        assert!(Error::new(conflict()).is_conflict());
        let parse = "x".parse::<u32>().unwrap_err();
        assert_eq!(Error::new(parse.clone()).to_string(), parse.to_string());
    }

    #[test]
    fn context_on_option_and_result() {
        let none: Option<u8> = None;
        assert_eq!(
            none.context("no value").unwrap_err().to_string(),
            "no value"
        );
        let failed: Result<u8, CallError> = Err(conflict());
        let error = failed.with_context(|| format!("step {}", 3)).unwrap_err();
        assert_eq!(error.to_string(), "step 3");
        assert!(error.is_conflict());
    }
}
