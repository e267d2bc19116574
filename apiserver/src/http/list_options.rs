//! The rules a real API server checks on a list's or a watch's options before serving it
//! (`resourceVersionMatch`, `sendInitialEvents`, `continue`), refused as it refuses them: 422 on
//! `ListOptions.meta.k8s.io`, one cause per rule broken.

use super::request::Query;
use crate::error::ApiError;

const KIND: &str = "ListOptions.meta.k8s.io";
const NOT_OLDER_THAN: &str = "NotOlderThan";

/// Checks the options of a list (`watch` false) or a watch.
///
/// # Errors
/// [`ApiError::Invalid`] naming each rule broken.
pub(super) fn validate(query: &Query, watch: bool) -> Result<(), ApiError> {
    let given = |key: &str| query.get(key).filter(|value| !value.is_empty());
    let matching = given("resourceVersionMatch").map(String::as_str);
    let version = given("resourceVersion").map(String::as_str);
    let continuing = given("continue").is_some();
    let initial_events = query.contains_key("sendInitialEvents");
    let mut problems = Vec::new();
    let forbidden = |problems: &mut Vec<String>, field: &str, why: &str| {
        problems.push(format!("{field}: Forbidden: {why}"));
    };
    if watch {
        if initial_events && matching != Some(NOT_OLDER_THAN) {
            forbidden(
                &mut problems,
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            );
        }
        if let Some(matching) = matching {
            if !initial_events {
                forbidden(
                    &mut problems,
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is \
                     provided",
                );
            }
            if matching != NOT_OLDER_THAN {
                problems.push(format!(
                    "resourceVersionMatch: Unsupported value: \"{matching}\": supported values: \
                     \"{NOT_OLDER_THAN}\""
                ));
            }
            if continuing {
                forbidden(
                    &mut problems,
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                );
            }
        }
    } else {
        if let Some(matching) = matching {
            if version.is_none() {
                forbidden(
                    &mut problems,
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
            if continuing {
                forbidden(
                    &mut problems,
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                );
            }
            if matching != "Exact" && matching != NOT_OLDER_THAN {
                problems.push(format!(
                    "resourceVersionMatch: Unsupported value: \"{matching}\": supported values: \
                     \"Exact\", \"{NOT_OLDER_THAN}\", \"\""
                ));
            }
            if matching == "Exact" && version == Some("0") {
                forbidden(
                    &mut problems,
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                );
            }
        }
        if initial_events {
            forbidden(
                &mut problems,
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            );
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_all(KIND, "", problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Query {
        text.split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn problems(text: &str, watch: bool) -> Vec<String> {
        match validate(&query(text), watch) {
            Ok(()) => Vec::new(),
            Err(ApiError::Invalid { problems, .. }) => problems,
            Err(other) => panic!("{text}: not a 422: {other}"),
        }
    }

    #[test]
    fn watch_list_options_follow_upstreams_rules() {
        for ok in [
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=5",
            "resourceVersion=0",
            "",
        ] {
            assert_eq!(problems(ok, true), Vec::<String>::new(), "{ok}");
        }
        assert_eq!(
            problems("sendInitialEvents=true", true),
            [
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting \
              resourceVersionMatch to NotOlderThan"
            ]
        );
        assert_eq!(
            problems("resourceVersionMatch=NotOlderThan", true),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch \
              unless sendInitialEvents is provided"
            ]
        );
        assert_eq!(
            problems("sendInitialEvents=true&resourceVersionMatch=Exact", true).len(),
            2
        );
    }

    #[test]
    fn list_options_follow_upstreams_rules() {
        for ok in [
            "resourceVersion=5&resourceVersionMatch=Exact",
            "resourceVersion=0&resourceVersionMatch=NotOlderThan",
            "limit=2",
        ] {
            assert_eq!(problems(ok, false), Vec::<String>::new(), "{ok}");
        }
        assert_eq!(
            problems("resourceVersionMatch=NotOlderThan", false),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless \
              resourceVersion is provided"
            ]
        );
        assert_eq!(
            problems("sendInitialEvents=true", false),
            ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]
        );
        assert_eq!(
            problems("resourceVersion=0&resourceVersionMatch=Exact", false),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for \
              resourceVersion \"0\""
            ]
        );
        assert!(
            problems("resourceVersion=1&resourceVersionMatch=Newest", false)[0]
                .starts_with("resourceVersionMatch: Unsupported value: \"Newest\"")
        );
    }
}
