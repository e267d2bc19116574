//! Kubernetes label selectors (`app=web,tier notin (db)`): parsed, printed and matched.
//!
//! One implementation for the host (manifests, the guests' cache reads, `check`) and the embedded
//! API server (the `labelSelector` query parameter). The syntax and the matching rules are those
//! of apimachinery's `labels.Parse`: requirements are separated by commas and all must hold;
//! `!=` and `notin` also match objects without the key; `key in ()` selects the empty value;
//! `key>n` and `key<n` compare integers. Keys and values are validated as Kubernetes validates
//! label keys and values.
#![deny(missing_docs)]

mod error;
mod parse;
mod requirement;
mod validate;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

pub use error::SelectorError;
pub use requirement::{Operator, Requirement};
pub use validate::{is_dns_label, is_dns_subdomain};

/// A parsed label selector: every requirement must hold for an object to match.
///
/// The empty selector matches every object. Requirements are sorted by key, as Kubernetes sorts
/// them (requirements on one key keep their written order), so [`Display`](fmt::Display) prints
/// one canonical form that parses back to an equal selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// An object's labels, as whoever holds them stores them.
pub trait Labels {
    /// The value of the label `key`; `None` when the object lacks it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl<K: AsRef<str>, V: AsRef<str>> Labels for [(K, V)] {
    fn label(&self, key: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Labels for Vec<(K, V)> {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_slice().label(key)
    }
}

impl<V: AsRef<str>> Labels for BTreeMap<String, V> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(AsRef::as_ref)
    }
}

impl<V: AsRef<str>, S: BuildHasher> Labels for HashMap<String, V, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(AsRef::as_ref)
    }
}

impl LabelSelector {
    /// Parses a selector written as for `kubectl get -l`; the empty (or blank) text selects
    /// everything.
    ///
    /// # Errors
    /// [`SelectorError`] naming the selector, the offending token and what was expected.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = parse::Parser::new(text).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether an object with these labels is selected; the order of `labels` does not matter.
    #[must_use]
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.matches_by(|key| labels.label(key))
    }

    /// Whether an object is selected whose label `key` has the value `label(key)` (`None`: the
    /// object lacks it). For label stores that are not [`Labels`], such as JSON objects.
    #[must_use]
    pub fn matches_by<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| requirement.matches(label(&requirement.key)))
    }

    /// The requirements, sorted by key.
    #[must_use]
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this is the empty selector, which matches every object.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form: requirements sorted by key, joined by `,`, without spaces except
    /// around `in` and `notin`; `==` is written `=`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(Box<str>, Box<str>)> {
        pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    fn selects(selector: &str, pairs: &[(&str, &str)]) -> bool {
        LabelSelector::parse(selector)
            .unwrap_or_else(|e| panic!("{e}"))
            .matches(&labels(pairs))
    }

    #[test]
    fn the_empty_selector_matches_everything() {
        for text in ["", "   ", "\t\n"] {
            let selector = LabelSelector::parse(text).unwrap();
            assert!(selector.is_empty());
            assert!(selector.matches(&labels(&[])));
            assert!(selector.matches(&labels(&[("app", "web")])));
            assert!(selector.matches_by(|_| None));
            assert_eq!(selector.to_string(), "");
        }
    }

    #[test]
    fn equality_needs_the_key_with_that_value() {
        for text in ["app=web", "app==web", " app = web "] {
            assert!(selects(text, &[("app", "web"), ("tier", "fe")]), "{text}");
            assert!(!selects(text, &[("app", "api")]), "{text}");
            assert!(!selects(text, &[]), "{text}");
        }
    }

    #[test]
    fn inequality_also_matches_objects_without_the_key() {
        assert!(selects("app!=web", &[("app", "api")]));
        assert!(selects("app!=web", &[("other", "web")]));
        assert!(selects("app!=web", &[]));
        assert!(!selects("app!=web", &[("app", "web")]));
    }

    #[test]
    fn in_needs_the_key_with_one_of_the_values() {
        let text = "env in (prod, staging)";
        assert!(selects(text, &[("env", "prod")]));
        assert!(selects(text, &[("env", "staging")]));
        assert!(!selects(text, &[("env", "dev")]));
        assert!(!selects(text, &[]));
    }

    #[test]
    fn notin_also_matches_objects_without_the_key() {
        let text = "env notin (prod,staging)";
        assert!(selects(text, &[("env", "dev")]));
        assert!(selects(text, &[]));
        assert!(!selects(text, &[("env", "prod")]));
        assert!(!selects("env notin (prod,dev)", &[("env", "dev")]));
    }

    #[test]
    fn exists_and_does_not_exist_look_only_at_the_key() {
        assert!(selects("app", &[("app", "")]));
        assert!(selects("app", &[("app", "web")]));
        assert!(!selects("app", &[("apps", "web")]));
        assert!(selects("!app", &[("apps", "web")]));
        assert!(selects("! app", &[]));
        assert!(!selects("!app", &[("app", "")]));
    }

    #[test]
    fn greater_and_less_than_compare_integers() {
        assert!(selects("replicas>2", &[("replicas", "3")]));
        assert!(!selects("replicas>2", &[("replicas", "2")]));
        assert!(!selects("replicas>2", &[("replicas", "many")]));
        assert!(!selects("replicas>2", &[]));
        assert!(selects("replicas<2", &[("replicas", "1")]));
        assert!(!selects("replicas<2", &[("replicas", "2")]));
        assert!(selects("replicas < 10", &[("replicas", "-5")]));
        // as in Kubernetes, the bound is a label value too, so it cannot be negative
        assert!(LabelSelector::parse("replicas < -1").is_err());
    }

    #[test]
    fn all_requirements_must_hold() {
        let text = "app=web,tier in (fe,be),!canary,env!=prod";
        assert!(selects(text, &[("app", "web"), ("tier", "fe")]));
        assert!(!selects(text, &[("app", "web"), ("tier", "db")]));
        assert!(!selects(
            text,
            &[("app", "web"), ("tier", "fe"), ("canary", "1")]
        ));
        assert!(!selects(
            text,
            &[("app", "web"), ("tier", "fe"), ("env", "prod")]
        ));
        let six = "app=web, tier!=db,env in (a,b),x notin (c),has,!missing";
        assert_eq!(LabelSelector::parse(six).unwrap().requirements().len(), 6);
    }

    #[test]
    fn empty_values_are_values() {
        assert!(selects("app=", &[("app", "")]));
        assert!(!selects("app=", &[("app", "x")]));
        assert!(selects("app in ()", &[("app", "")]));
        assert!(selects("app in (a,)", &[("app", "")]));
        assert!(selects("app in (,a)", &[("app", "a")]));
        assert_eq!(
            LabelSelector::parse("app in (b,,a,b)")
                .unwrap()
                .requirements()[0]
                .values,
            ["", "a", "b"]
        );
    }

    #[test]
    fn maps_and_lookup_functions_are_label_stores_too() {
        let selector = LabelSelector::parse("app=web,!canary").unwrap();
        let map: BTreeMap<String, String> = [("app".to_owned(), "web".to_owned())].into();
        assert!(selector.matches(&map));
        let hash: HashMap<String, &str> = [("app".to_owned(), "db")].into();
        assert!(!selector.matches(&hash));
        assert!(selector.matches_by(|key| (key == "app").then_some("web")));
        assert!(!selector.matches_by(|_| Some("web")));
    }

    #[test]
    fn keys_may_have_a_dns_subdomain_prefix() {
        assert!(selects(
            "app.kubernetes.io/name=web",
            &[("app.kubernetes.io/name", "web")]
        ));
        assert!(selects("in=notin", &[("in", "notin")]));
        assert!(LabelSelector::parse(&format!("{}=x", "k".repeat(63))).is_ok());
    }

    #[test]
    fn display_is_canonical_and_sorted_by_key() {
        let selector: LabelSelector = "z==1, b notin (y,x,x), a, !c, k>3, example.com/n<4"
            .parse()
            .unwrap();
        assert_eq!(
            selector.to_string(),
            "a,b notin (x,y),!c,example.com/n<4,k>3,z=1"
        );
        let selector = LabelSelector::parse("a==1 , b notin (z,y),!c, d in (x)").unwrap();
        assert_eq!(selector.to_string(), "a=1,b notin (y,z),!c,d in (x)");
    }

    #[test]
    fn from_str_and_parse_agree() {
        let parsed: LabelSelector = "a in (x)".parse().unwrap();
        assert_eq!(parsed, LabelSelector::parse("a in (x)").unwrap());
        assert!("a in".parse::<LabelSelector>().is_err());
    }

    #[test]
    fn displayed_selectors_parse_back_to_themselves_in_a_table() {
        for text in [
            "a",
            "!a",
            "a=",
            "a!=",
            "a in ()",
            "a in (,x)",
            "a notin (x,y)",
            "a=b,c!=d,e in (f),g notin (h,i),j,!k,l>1,m<2",
            "x.io/a=B-1_c.d",
        ] {
            let selector = LabelSelector::parse(text).unwrap();
            assert_eq!(selector.to_string(), text);
            assert_eq!(
                LabelSelector::parse(&selector.to_string()).unwrap(),
                selector
            );
        }
    }
}
