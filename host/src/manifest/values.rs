//! Scalar values of a manifest and their checks: memory sizes, durations, integers in range,
//! kinds and names, each refused with a [`Problem`] naming the field.

use std::time::Duration;

use label_selector::{is_dns_label, is_dns_subdomain};

use crate::config::duration;
use crate::runtime::KindRef;

/// A mebibyte.
pub(super) const MI: u64 = 1 << 20;
/// A gibibyte.
pub(super) const GI: u64 = 1 << 30;

pub use crate::config::quantity;

/// A problem found while validating, before the manifest's path is attached.
#[derive(Debug)]
pub(super) struct Problem {
    pub(super) field: String,
    pub(super) problem: String,
}

pub(super) fn problem(field: impl Into<String>, problem: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A duration field: `default` when absent, else parsed and checked to be in `min..=max`.
pub(super) fn duration_in(
    field: &str,
    text: Option<&str>,
    default: Duration,
    (min, max): (Duration, Duration),
    range: &str,
) -> Result<Duration, Problem> {
    let Some(text) = text else {
        return Ok(default);
    };
    let parsed = duration::parse(text).map_err(|message| problem(field, message))?;
    if parsed < min || parsed > max {
        return Err(problem(field, format!("`{text}` is out of range; {range}")));
    }
    Ok(parsed)
}

/// A memory field: `default` when absent, else a quantity in `min..=max` bytes.
pub(super) fn memory_in(
    field: &str,
    text: Option<&str>,
    default: u64,
    (min, max): (u64, u64),
    range: &str,
) -> Result<u64, Problem> {
    let Some(text) = text else {
        return Ok(default);
    };
    let bytes = quantity(text).map_err(|message| problem(field, message))?;
    if bytes < min || bytes > max {
        return Err(problem(field, format!("`{text}` is out of range; {range}")));
    }
    Ok(bytes)
}

/// An integer field: `default` when absent, else in `min..=max`.
pub(super) fn integer_in<T: TryFrom<i64>>(
    field: &str,
    value: Option<i64>,
    default: T,
    max: i64,
    fix: &str,
) -> Result<T, Problem> {
    match value {
        None => Ok(default),
        Some(value) => (1..=max)
            .contains(&value)
            .then(|| T::try_from(value).ok())
            .flatten()
            .ok_or_else(|| problem(field, format!("`{value}` is out of range; {fix}"))),
    }
}

pub(super) fn kind_ref(field: &str, api_version: &str, kind: &str) -> Result<KindRef, Problem> {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, api_version),
    };
    let version_ok = is_dns_label(version) && version.starts_with(|c: char| c.is_ascii_lowercase());
    if api_version.is_empty() || !version_ok || group.is_some_and(|g| !is_dns_subdomain(g)) {
        let what = if api_version.is_empty() {
            "missing".to_owned()
        } else {
            format!("`{api_version}` is not an apiVersion")
        };
        return Err(problem(
            format!("{field}.apiVersion"),
            format!(
                "{what}; write `version` for the core group (e.g. `v1`) or `group/version` (e.g. `apps/v1`), in lowercase"
            ),
        ));
    }
    let kind_ok = kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !kind_ok {
        let what = if kind.is_empty() {
            "missing".to_owned()
        } else {
            format!("`{kind}` is not a kind")
        };
        return Err(problem(
            format!("{field}.kind"),
            format!("{what}; write the kind's name, letters and digits, e.g. `Deployment`"),
        ));
    }
    Ok(KindRef::new(api_version, kind))
}

pub(super) fn describe(kind: &KindRef) -> String {
    format!("{} {}", kind.api_version, kind.kind)
}

/// Checks a DNS-1123 label (a name or namespace); `Some(problem)` when it is not one.
pub(super) fn label_problem(what: &str, value: &str) -> Option<String> {
    (!is_dns_label(value)).then(|| {
        format!(
            "`{value}` is not a valid {what}; use lowercase letters, digits and `-`, at most 63 \
             characters, starting and ending with a letter or digit"
        )
    })
}

/// Checks a list: each entry passes `check`, none is written twice.
pub(super) fn each_once(
    field: &str,
    list: &[String],
    check: impl Fn(&str) -> Option<String>,
) -> Result<(), Problem> {
    for (i, entry) in list.iter().enumerate() {
        if let Some(problem_text) = check(entry) {
            return Err(problem(field, problem_text));
        }
        if list[..i].contains(entry) {
            return Err(problem(
                field,
                format!("`{entry}` is listed twice; remove one"),
            ));
        }
    }
    Ok(())
}
