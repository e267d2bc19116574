//! Why a label selector was refused: one error type whose messages quote the selector.

/// Why a label selector was refused; every message quotes the selector.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A token that cannot come at this place, or the text ended too early.
    #[error(
        "label selector `{selector}`: expected {expected} {}{}",
        after.as_ref().map_or_else(|| "at the start".to_owned(), |token| format!("after `{token}`")),
        found.as_ref().map_or_else(String::new, |token| format!(", found `{token}`"))
    )]
    Unexpected {
        /// The whole selector text.
        selector: String,
        /// Byte offset of the offending token (the text's length when it ended too early).
        position: usize,
        /// What would have been accepted, e.g. "`,` or `)`".
        expected: &'static str,
        /// The token before the offending one; `None` at the start.
        after: Option<String>,
        /// The offending token; `None` when the text ended.
        found: Option<String>,
    },
    /// A key that is not a Kubernetes label key.
    #[error("label selector `{selector}`: `{key}` is not a label key: {reason}")]
    InvalidKey {
        /// The whole selector text.
        selector: String,
        /// The key as written.
        key: String,
        /// What is wrong with it and what a key looks like.
        reason: String,
    },
    /// A value that is not a Kubernetes label value.
    #[error(
        "label selector `{selector}`: `{value}` is not a valid value for label `{key}`: {reason}"
    )]
    InvalidValue {
        /// The whole selector text.
        selector: String,
        /// The key the value is compared with.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it and what a value looks like.
        reason: String,
    },
    /// The value of `>` or `<` is not an integer.
    #[error(
        "label selector `{selector}`: `{key}` is compared with `{value}`, which is not an \
         integer; `>` and `<` compare whole numbers, e.g. `{key}>3`"
    )]
    NotAnInteger {
        /// The whole selector text.
        selector: String,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
    },
}
