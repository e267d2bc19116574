//! Go-style durations: `1h`, `2m`, `15s`, `500ms`, or combinations like `1m30s`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses a duration, e.g. `1m30s` or `250ms`.
///
/// # Errors
/// A message naming the bad text and the accepted units.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration; use e.g. 500ms, 15s, 2m, 1h or 1m30s");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(value * seconds).map_err(|_| bad())?;
    }
    Ok(total)
}

/// serde adapter for [`parse`].
///
/// # Errors
/// When the value is not a duration string.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse(&text).map_err(serde::de::Error::custom)
}
