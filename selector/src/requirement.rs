//! One requirement of a label selector, and how it matches a label.

use std::fmt;

/// One requirement of a selector, such as `app in (web,api)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The label key, e.g. `app` or `app.kubernetes.io/name`.
    pub key: String,
    /// How the label's value is compared with [`values`](Self::values).
    pub operator: Operator,
    /// The values compared with, sorted and without duplicates: one for `=`, `!=`, `>` and `<`,
    /// at least one for `in` and `notin`, none for exists and does-not-exist.
    pub values: Vec<String>,
}

/// The comparison a [`Requirement`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value` or `key==value`: the label is present with that value.
    Equals,
    /// `key!=value`: the label is absent or has another value.
    NotEquals,
    /// `key in (a,b)`: the label is present with one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key`: the label is present, with any value.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>3`: the label is present, is an integer, and is greater than the value.
    GreaterThan,
    /// `key<3`: the label is present, is an integer, and is less than the value.
    LessThan,
}

impl Requirement {
    /// Whether a label with this value (`None`: the object lacks the key) meets the requirement.
    #[must_use]
    pub fn matches(&self, value: Option<&str>) -> bool {
        let listed = |value: &str| self.values.iter().any(|v| v == value);
        let compare = |wanted: std::cmp::Ordering| {
            let (Some(value), Some(bound)) = (value, self.values.first()) else {
                return false;
            };
            match (value.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(value), Ok(bound)) => value.cmp(&bound) == wanted,
                _ => false,
            }
        };
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan => compare(std::cmp::Ordering::Greater),
            Operator::LessThan => compare(std::cmp::Ordering::Less),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let first = self.values.first().map_or("", String::as_str);
        match self.operator {
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::Equals => write!(f, "{key}={first}"),
            Operator::NotEquals => write!(f, "{key}!={first}"),
            Operator::GreaterThan => write!(f, "{key}>{first}"),
            Operator::LessThan => write!(f, "{key}<{first}"),
            Operator::In | Operator::NotIn => {
                let word = if self.operator == Operator::In {
                    "in"
                } else {
                    "notin"
                };
                write!(f, "{key} {word} ({})", self.values.join(","))
            }
        }
    }
}
