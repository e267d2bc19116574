//! Property tests: printing a parsed selector and parsing it again gives the same selector, and
//! matching agrees with a small reference model of Kubernetes' label selector semantics.

use std::collections::BTreeMap;

use label_selector::LabelSelector;
use proptest::prelude::*;

/// A requirement as the generator builds it: what the text means, independent of the parser.
#[derive(Clone, Debug)]
enum Model {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

impl Model {
    /// The requirement as someone might type it, with `spaced` choosing loose or tight spacing.
    fn text(&self, spaced: bool) -> String {
        let s = if spaced { " " } else { "" };
        match self {
            Model::Equals(k, v) if spaced => format!("{k} == {v}"),
            Model::Equals(k, v) => format!("{k}={v}"),
            Model::NotEquals(k, v) => format!("{k}{s}!={s}{v}"),
            Model::In(k, vs) => format!("{k} in ({s}{}{s})", vs.join(&format!("{s},{s}"))),
            Model::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Model::Exists(k) => k.clone(),
            Model::DoesNotExist(k) => format!("!{s}{k}"),
            Model::GreaterThan(k, n) => format!("{k}{s}>{s}{n}"),
            Model::LessThan(k, n) => format!("{k}{s}<{s}{n}"),
        }
    }

    /// Kubernetes' meaning, written from the documentation rather than from the crate.
    fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        let integer = |k: &str| labels.get(k).and_then(|v| v.parse::<i64>().ok());
        match self {
            Model::Equals(k, v) => labels.get(k) == Some(v),
            Model::NotEquals(k, v) => labels.get(k) != Some(v),
            Model::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Model::NotIn(k, vs) => !labels.get(k).is_some_and(|v| vs.contains(v)),
            Model::Exists(k) => labels.contains_key(k),
            Model::DoesNotExist(k) => !labels.contains_key(k),
            Model::GreaterThan(k, n) => integer(k).is_some_and(|v| v > *n),
            Model::LessThan(k, n) => integer(k).is_some_and(|v| v < *n),
        }
    }
}

fn key() -> impl Strategy<Value = String> {
    (
        prop::option::of("[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z]{1,4}){0,2}"),
        // a small alphabet so that generated labels often hit generated keys
        prop_oneof![
            3 => "[a-c]",
            1 => "[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?",
        ],
    )
        .prop_map(|(prefix, name)| match prefix {
            Some(prefix) => format!("{prefix}/{name}"),
            None => name,
        })
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[x-z]",
        "[0-9]{1,3}",
        "[A-Za-z0-9]([A-Za-z0-9_.-]{0,8}[A-Za-z0-9])?",
    ]
}

fn requirement() -> impl Strategy<Value = Model> {
    let values = || prop::collection::vec(value(), 1..4);
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| Model::Equals(k, v)),
        (key(), value()).prop_map(|(k, v)| Model::NotEquals(k, v)),
        (key(), values()).prop_map(|(k, v)| Model::In(k, v)),
        (key(), values()).prop_map(|(k, v)| Model::NotIn(k, v)),
        key().prop_map(Model::Exists),
        key().prop_map(Model::DoesNotExist),
        (key(), 0..50_i64).prop_map(|(k, n)| Model::GreaterThan(k, n)),
        (key(), 0..=i64::MAX).prop_map(|(k, n)| Model::LessThan(k, n)),
    ]
}

fn selector_text(requirements: &[Model], spaced: bool) -> String {
    let texts: Vec<String> = requirements.iter().map(|r| r.text(spaced)).collect();
    texts.join(if spaced { " , " } else { "," })
}

proptest! {
    #[test]
    fn print_then_parse_gives_the_same_selector(
        requirements in prop::collection::vec(requirement(), 0..6),
        spaced in any::<bool>(),
    ) {
        let text = selector_text(&requirements, spaced);
        let selector = LabelSelector::parse(&text).unwrap();
        let canonical = selector.to_string();
        let reparsed = LabelSelector::parse(&canonical).unwrap();
        prop_assert_eq!(&reparsed, &selector);
        prop_assert_eq!(reparsed.to_string(), canonical);
        prop_assert_eq!(selector.requirements().len(), requirements.len());
    }

    #[test]
    fn matching_agrees_with_the_reference_model(
        requirements in prop::collection::vec(requirement(), 0..5),
        labels in prop::collection::btree_map(key(), value(), 0..6),
        spaced in any::<bool>(),
    ) {
        let selector = LabelSelector::parse(&selector_text(&requirements, spaced)).unwrap();
        let expected = requirements.iter().all(|r| r.holds(&labels));
        prop_assert_eq!(selector.matches(&labels), expected);
        let pairs: Vec<(&str, &str)> =
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        prop_assert_eq!(selector.matches(pairs.as_slice()), expected);
        prop_assert_eq!(selector.matches_by(|k| labels.get(k).map(String::as_str)), expected);
    }

    #[test]
    fn not_equals_is_the_negation_of_equals(
        key in key(),
        value in value(),
        present in prop::option::of(value()),
    ) {
        let labels: BTreeMap<String, String> =
            present.map(|v| (key.clone(), v)).into_iter().collect();
        let equals = LabelSelector::parse(&format!("{key}={value}")).unwrap();
        let not_equals = LabelSelector::parse(&format!("{key}!={value}")).unwrap();
        prop_assert_ne!(equals.matches(&labels), not_equals.matches(&labels));
    }
}
