//! The host's log, attributed to the plugin and to the key being reconciled.
//!
//! Use the macros [`trace!`](crate::trace), [`debug!`](crate::debug), [`info!`](crate::info),
//! [`warn!`](crate::warn) and [`error!`](crate::error), which take `format!` arguments. A
//! guest's stdout and stderr reach the same log, at info and warn.

use crate::host::log as host;

pub use crate::bindings::kube::reconcile::log::Level;

/// Logs `message` at `level`; the host's log filter decides what is shown.
pub fn write(level: Level, message: &str) {
    host::log(level, message);
}

/// Logs at trace level, with `format!` arguments: `trace!("read {} keys", keys.len())`.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => {
        $crate::log::write($crate::log::Level::Trace, &::std::format!($($arg)+))
    };
}

/// Logs at debug level, with `format!` arguments.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => {
        $crate::log::write($crate::log::Level::Debug, &::std::format!($($arg)+))
    };
}

/// Logs at info level, with `format!` arguments: `info!("copied {name} to {namespace}")`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => {
        $crate::log::write($crate::log::Level::Info, &::std::format!($($arg)+))
    };
}

/// Logs at warn level, with `format!` arguments.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => {
        $crate::log::write($crate::log::Level::Warn, &::std::format!($($arg)+))
    };
}

/// Logs at error level, with `format!` arguments.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => {
        $crate::log::write($crate::log::Level::Error, &::std::format!($($arg)+))
    };
}

/// Sets the attribute `guest.<name>` of this reconcile's span to `value`, when the host traces
/// reconciles (OpenTelemetry; otherwise a debug line of the host's log). `name` is 1–64 ASCII
/// letters, digits, `_`, `.` or `-`. Any SDK does the same by logging
/// `span.attribute <name>=<value>`; every other message is an event of the span.
pub fn span_attribute(name: &str, value: &str) {
    host::log(Level::Debug, &format!("span.attribute {name}={value}"));
}
