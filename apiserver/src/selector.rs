//! Label and field selectors, parsed from their query-string form and matched against objects.
//!
//! [`LabelSelector`] is the `labelSelector` query parameter: comma-separated requirements, all of
//! which must hold, each one of `key=value` (also `key==value`), `key!=value`,
//! `key in (a,b)`, `key notin (a,b)`, `key` (the label exists) and `!key` (it does not). Keys and
//! values are validated as Kubernetes validates label keys and values. `key in ()` selects the
//! empty value, as in Kubernetes. `key>n` and `key<n` select labels holding an integer greater
//! or less than `n`, as Kubernetes' Gt and Lt operators do.
//!
//! [`FieldSelector`] is the `fieldSelector` query parameter: comma-separated `field=value`,
//! `field==value` or `field!=value` terms over `metadata.name` and `metadata.namespace`, the
//! fields every kind supports. `\,`, `\=` and `\\` escape those characters in values.
//!
//! The empty string parses to a selector that matches everything.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

/// Why a label or field selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// A token appeared where the grammar expects something else.
    #[error("unable to parse requirement: found '{found}', expected: {expected}")]
    UnexpectedToken {
        /// The offending token.
        found: String,
        /// What could have been there instead.
        expected: &'static str,
    },
    /// The selector ended in the middle of a requirement.
    #[error("unable to parse requirement: unexpected end of selector, expected: {expected}")]
    UnexpectedEnd {
        /// What the requirement still needed.
        expected: &'static str,
    },
    /// A label key is not a valid Kubernetes label key.
    #[error("invalid label key '{key}': {reason}")]
    InvalidLabelKey {
        /// The key as written.
        key: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A label value is not a valid Kubernetes label value.
    #[error("invalid label value '{value}': {reason}")]
    InvalidLabelValue {
        /// The value as written.
        value: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{term}'; can't understand '{term}'")]
    InvalidFieldTerm {
        /// The term as written.
        term: String,
    },
    /// A field selector names a field this server cannot select on.
    #[error("field label not supported: {field}")]
    UnsupportedField {
        /// The field as written.
        field: String,
    },
}

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`: the label exists with this value.
    Equals(String, String),
    /// `key!=value`: the label is absent or has another value.
    NotEquals(String, String),
    /// `key in (a,b)`: the label exists with one of these values.
    In(String, BTreeSet<String>),
    /// `key notin (a,b)`: the label is absent or has none of these values.
    NotIn(String, BTreeSet<String>),
    /// `key`: the label exists.
    Exists(String),
    /// `!key`: the label does not exist.
    DoesNotExist(String),
    /// `key>n`: the label exists and is an integer greater than `n`.
    GreaterThan(String, i64),
    /// `key<n`: the label exists and is an integer less than `n`.
    LessThan(String, i64),
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let value = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        match self {
            Requirement::Equals(key, expected) => value(key) == Some(expected.as_str()),
            Requirement::NotEquals(key, expected) => value(key) != Some(expected.as_str()),
            Requirement::In(key, values) => value(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => !value(key).is_some_and(|v| values.contains(v)),
            Requirement::Exists(key) => labels.is_some_and(|l| l.contains_key(key)),
            Requirement::DoesNotExist(key) => !labels.is_some_and(|l| l.contains_key(key)),
            Requirement::GreaterThan(key, bound) => value(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *bound),
            Requirement::LessThan(key, bound) => value(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *bound),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Requirement::Equals(key, value) => write!(f, "{key}={value}"),
            Requirement::NotEquals(key, value) => write!(f, "{key}!={value}"),
            Requirement::In(key, values) => write!(f, "{key} in ({})", join(values)),
            Requirement::NotIn(key, values) => write!(f, "{key} notin ({})", join(values)),
            Requirement::Exists(key) => write!(f, "{key}"),
            Requirement::DoesNotExist(key) => write!(f, "!{key}"),
            Requirement::GreaterThan(key, bound) => write!(f, "{key}>{bound}"),
            Requirement::LessThan(key, bound) => write!(f, "{key}<{bound}"),
        }
    }
}

/// A parsed `labelSelector`: a conjunction of [`Requirement`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// A token of the label selector language.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Identifier(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Open,
    Close,
    Comma,
    Greater,
    Less,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Token::Identifier(s) => s,
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::Greater => ">",
            Token::Less => "<",
        })
    }
}

fn tokenize(s: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            ',' => tokens.push(Token::Comma),
            '>' => tokens.push(Token::Greater),
            '<' => tokens.push(Token::Less),
            '=' if chars.peek() == Some(&'=') => {
                chars.next();
                tokens.push(Token::DoubleEquals);
            }
            '=' => tokens.push(Token::Equals),
            '!' if chars.peek() == Some(&'=') => {
                chars.next();
                tokens.push(Token::NotEquals);
            }
            '!' => tokens.push(Token::Not),
            c => {
                let mut identifier = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || "(),=!<>".contains(next) {
                        break;
                    }
                    identifier.push(next);
                    chars.next();
                }
                tokens.push(Token::Identifier(identifier));
            }
        }
    }
    tokens
}

/// A cursor over the tokens of one selector.
struct Parser {
    tokens: std::vec::IntoIter<Token>,
    peeked: Option<Token>,
}

impl Parser {
    fn peek(&mut self) -> Option<&Token> {
        if self.peeked.is_none() {
            self.peeked = self.tokens.next();
        }
        self.peeked.as_ref()
    }

    fn next(&mut self) -> Option<Token> {
        self.peek();
        self.peeked.take()
    }

    fn identifier(&mut self, expected: &'static str) -> Result<String, SelectorError> {
        match self.next() {
            Some(Token::Identifier(s)) => Ok(s),
            Some(other) => Err(SelectorError::UnexpectedToken {
                found: other.to_string(),
                expected,
            }),
            None => Err(SelectorError::UnexpectedEnd { expected }),
        }
    }

    /// A value after `=`, `==` or `!=`: possibly empty (`key=` selects the empty value).
    fn value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            _ => validate_value(self.identifier("a label value")?),
        }
    }

    /// The integer after `>` or `<`.
    fn integer(&mut self) -> Result<i64, SelectorError> {
        let value = self.identifier("an integer")?;
        value.parse().map_err(|_| SelectorError::InvalidLabelValue {
            value,
            reason: "for '>' and '<' operators, the value must be an integer".into(),
        })
    }

    /// `(a, b, ...)` after `in` or `notin`; `()` is the set of the empty value, as in
    /// Kubernetes.
    fn values(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        match self.next() {
            Some(Token::Open) => {}
            Some(other) => {
                return Err(SelectorError::UnexpectedToken {
                    found: other.to_string(),
                    expected: "'('",
                });
            }
            None => return Err(SelectorError::UnexpectedEnd { expected: "'('" }),
        }
        let mut values = BTreeSet::new();
        loop {
            let value = match self.peek() {
                Some(Token::Comma | Token::Close) => String::new(),
                _ => validate_value(self.identifier("a label value, ',' or ')'")?)?,
            };
            values.insert(value);
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::Close) => return Ok(values),
                Some(other) => {
                    return Err(SelectorError::UnexpectedToken {
                        found: other.to_string(),
                        expected: "',' or ')'",
                    });
                }
                None => {
                    return Err(SelectorError::UnexpectedEnd {
                        expected: "',' or ')'",
                    });
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if self.peek() == Some(&Token::Not) {
            self.next();
            let key = validate_key(self.identifier("a label key after '!'")?)?;
            return Ok(Requirement::DoesNotExist(key));
        }
        let key = validate_key(self.identifier("a label key or '!'")?)?;
        const OPERATORS: &str = "'=', '!=', '==', 'in', 'notin', '>', '<', ',' or the end";
        match self.peek() {
            None | Some(Token::Comma) => Ok(Requirement::Exists(key)),
            Some(Token::Equals | Token::DoubleEquals) => {
                self.next();
                Ok(Requirement::Equals(key, self.value()?))
            }
            Some(Token::NotEquals) => {
                self.next();
                Ok(Requirement::NotEquals(key, self.value()?))
            }
            Some(Token::Identifier(op)) if op == "in" => {
                self.next();
                let values = self.values()?;
                Ok(Requirement::In(key, values))
            }
            Some(Token::Identifier(op)) if op == "notin" => {
                self.next();
                let values = self.values()?;
                Ok(Requirement::NotIn(key, values))
            }
            Some(Token::Greater) => {
                self.next();
                Ok(Requirement::GreaterThan(key, self.integer()?))
            }
            Some(Token::Less) => {
                self.next();
                Ok(Requirement::LessThan(key, self.integer()?))
            }
            Some(other) => Err(SelectorError::UnexpectedToken {
                found: other.to_string(),
                expected: OPERATORS,
            }),
        }
    }
}

/// A label name or value part: alphanumeric at both ends, `-`, `_`, `.` inside, ≤ 63 chars.
fn name_problem(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some(format!(
            "must be no more than 63 characters (is {})",
            s.len()
        ));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let starts_and_ends = s.starts_with(alnum) && s.ends_with(alnum);
    let body = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !starts_and_ends || !body {
        return Some(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
             with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// A DNS-1123 subdomain: lowercase alphanumeric labels joined by `.`, `-` inside, ≤ 253 chars.
fn prefix_problem(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some(format!(
            "prefix must be no more than 253 characters (is {})",
            s.len()
        ));
    }
    let valid_label = |label: &str| {
        let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        !label.is_empty()
            && label.starts_with(lower_alnum)
            && label.ends_with(lower_alnum)
            && label.chars().all(|c| lower_alnum(c) || c == '-')
    };
    if !s.split('.').all(valid_label) {
        return Some(
            "prefix must be a lowercase RFC 1123 subdomain: lowercase alphanumeric characters, \
             '-' or '.', starting and ending with an alphanumeric character"
                .into(),
        );
    }
    None
}

fn validate_key(key: String) -> Result<String, SelectorError> {
    let problem = match key.split_once('/') {
        Some((prefix, name)) => {
            if name.is_empty() {
                Some("name part must be non-empty".to_owned())
            } else {
                prefix_problem(prefix).or_else(|| name_problem(name))
            }
        }
        None if key.is_empty() => Some("name part must be non-empty".to_owned()),
        None => name_problem(&key),
    };
    match problem {
        Some(reason) => Err(SelectorError::InvalidLabelKey { key, reason }),
        None => Ok(key),
    }
}

fn validate_value(value: String) -> Result<String, SelectorError> {
    if value.is_empty() {
        return Ok(value);
    }
    match name_problem(&value) {
        Some(reason) => Err(SelectorError::InvalidLabelValue { value, reason }),
        None => Ok(value),
    }
}

impl LabelSelector {
    /// Parses `app=web,tier!=db,env in (a,b),x notin (c),has,!missing`; `""` matches
    /// everything.
    ///
    /// # Errors
    ///
    /// A [`SelectorError`] naming the offending token, key or value.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            tokens: tokenize(s).into_iter(),
            peeked: None,
        };
        let mut requirements = Vec::new();
        if parser.peek().is_none() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                None => return Ok(LabelSelector { requirements }),
                Some(Token::Comma) => {}
                Some(other) => {
                    return Err(SelectorError::UnexpectedToken {
                        found: other.to_string(),
                        expected: "',' or the end",
                    });
                }
            }
        }
    }

    /// Whether the labels satisfy every requirement. `labels` is `metadata.labels` (`None` when
    /// the object has no labels); non-string label values count as absent.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirement (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form: requirements joined by `,`, `=` for equality, set values sorted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// The fields a [`FieldSelector`] can select on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectableField {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace` (`""` for cluster-scoped objects).
    Namespace,
}

impl SelectableField {
    fn get(self, object: &Value) -> &str {
        let key = match self {
            SelectableField::Name => "name",
            SelectableField::Namespace => "namespace",
        };
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// One field selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The selected field.
    pub field: SelectableField,
    /// `true` for `=`/`==`, `false` for `!=`.
    pub equals: bool,
    /// The value, unescaped.
    pub value: String,
}

/// A parsed `fieldSelector`: a conjunction of [`FieldRequirement`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// Splits on `sep` where it is not escaped by a backslash.
fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (index, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(&s[start..index]);
            start = index + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds the first unescaped operator of a field selector term.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    let mut escaped = false;
    for (index, c) in term.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        let rest = &term[index..];
        let op = match c {
            '\\' => {
                escaped = true;
                continue;
            }
            '!' if rest.starts_with("!=") => "!=",
            '=' if rest.starts_with("==") => "==",
            '=' => "=",
            _ => continue,
        };
        return Some((&term[..index], op, &term[index + op.len()..]));
    }
    None
}

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`; `""` matches everything.
    ///
    /// # Errors
    ///
    /// [`SelectorError::InvalidFieldTerm`] for a term without operator,
    /// [`SelectorError::UnsupportedField`] (`field label not supported: <field>`) for a field
    /// other than `metadata.name` and `metadata.namespace`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for term in split_unescaped(s, ',') {
            let term = term.trim();
            let (field, op, value) =
                split_term(term).ok_or_else(|| SelectorError::InvalidFieldTerm {
                    term: term.to_owned(),
                })?;
            let field = match field.trim() {
                "metadata.name" => SelectableField::Name,
                "metadata.namespace" => SelectableField::Namespace,
                other => {
                    return Err(SelectorError::UnsupportedField {
                        field: other.to_owned(),
                    });
                }
            };
            requirements.push(FieldRequirement {
                field,
                equals: op != "!=",
                value: unescape(value.trim()),
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether the object satisfies every term; a missing field counts as `""`.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements
            .iter()
            .all(|r| (r.field.get(object) == r.value) == r.equals)
    }

    /// Whether the selector has no term (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms, in the order written.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn labels(value: Value) -> Map<String, Value> {
        value.as_object().expect("labels are an object").clone()
    }

    fn selects(selector: &str, object_labels: Value) -> bool {
        LabelSelector::parse(selector)
            .expect("selector parses")
            .matches(Some(&labels(object_labels)))
    }

    #[test]
    fn empty_label_selector_matches_everything() {
        let selector = LabelSelector::parse("").unwrap();
        assert!(selector.is_empty());
        assert!(selector.matches(None));
        assert!(selector.matches(Some(&labels(json!({"a": "b"})))));
        assert!(LabelSelector::parse("   ").unwrap().is_empty());
    }

    #[test]
    fn equality_operators_select_matching_values() {
        assert!(selects("app=web", json!({"app": "web"})));
        assert!(selects("app==web", json!({"app": "web"})));
        assert!(!selects("app=web", json!({"app": "db"})));
        assert!(!selects("app=web", json!({})));
        assert!(selects("app!=web", json!({"app": "db"})));
        assert!(selects("app!=web", json!({})));
        assert!(!selects("app!=web", json!({"app": "web"})));
    }

    #[test]
    fn set_operators_select_by_membership() {
        assert!(selects("env in (prod, staging)", json!({"env": "staging"})));
        assert!(!selects("env in (prod,staging)", json!({"env": "dev"})));
        assert!(!selects("env in (prod)", json!({})));
        assert!(selects("env notin (prod)", json!({"env": "dev"})));
        assert!(selects("env notin (prod)", json!({})));
        assert!(!selects("env notin (prod,dev)", json!({"env": "dev"})));
    }

    #[test]
    fn exists_and_not_exists_check_the_key_only() {
        assert!(selects("has", json!({"has": ""})));
        assert!(!selects("has", json!({"other": "x"})));
        assert!(selects("!missing", json!({"other": "x"})));
        assert!(!selects("!missing", json!({"missing": "x"})));
        let selector = LabelSelector::parse("!missing").unwrap();
        assert!(selector.matches(None));
        assert!(!LabelSelector::parse("has").unwrap().matches(None));
    }

    #[test]
    fn comma_separated_requirements_must_all_hold() {
        let selector = "app=web, tier!=db,env in (a,b),x notin (c),has,!missing";
        assert!(selects(
            selector,
            json!({"app": "web", "tier": "fe", "env": "a", "has": "1"})
        ));
        assert!(!selects(
            selector,
            json!({"app": "web", "tier": "fe", "env": "a", "has": "1", "missing": "2"})
        ));
        assert_eq!(
            LabelSelector::parse(selector).unwrap().requirements().len(),
            6
        );
    }

    #[test]
    fn prefixed_keys_and_empty_values_parse() {
        assert!(selects(
            "app.kubernetes.io/name=web",
            json!({"app.kubernetes.io/name": "web"})
        ));
        assert!(selects("blank=", json!({"blank": ""})));
        assert!(selects("blank in ()", json!({"blank": ""})));
        assert!(selects("blank in (x,)", json!({"blank": ""})));
        assert!(!selects("blank=", json!({"blank": "x"})));
    }

    #[test]
    fn invalid_keys_are_rejected_naming_the_key() {
        let too_long = "a".repeat(64);
        for bad in [
            too_long.as_str(),
            "-app",
            "Upper.Case/name",
            "prefix/",
            "a/b/c",
            "sp@ce",
        ] {
            let error = LabelSelector::parse(&format!("{bad}=x")).unwrap_err();
            assert!(
                matches!(&error, SelectorError::InvalidLabelKey { key, .. } if key == bad),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains(bad), "{error}");
        }
    }

    #[test]
    fn invalid_values_are_rejected_naming_the_value() {
        let error = LabelSelector::parse("app=-web").unwrap_err();
        assert!(
            matches!(&error, SelectorError::InvalidLabelValue { value, .. } if value == "-web")
        );
        let error = LabelSelector::parse("app in (ok,b@d)").unwrap_err();
        assert!(matches!(&error, SelectorError::InvalidLabelValue { value, .. } if value == "b@d"));
    }

    #[test]
    fn malformed_selectors_name_the_unexpected_token() {
        assert_eq!(
            LabelSelector::parse("app=web)").unwrap_err(),
            SelectorError::UnexpectedToken {
                found: ")".into(),
                expected: "',' or the end"
            }
        );
        assert!(matches!(
            LabelSelector::parse("app between (a)").unwrap_err(),
            SelectorError::UnexpectedToken { found, .. } if found == "between"
        ));
        assert!(matches!(
            LabelSelector::parse("env in a").unwrap_err(),
            SelectorError::UnexpectedToken { found, .. } if found == "a"
        ));
        assert_eq!(
            LabelSelector::parse("env in (a,b").unwrap_err(),
            SelectorError::UnexpectedEnd {
                expected: "',' or ')'"
            }
        );
        assert!(matches!(
            LabelSelector::parse(",app").unwrap_err(),
            SelectorError::UnexpectedToken { found, .. } if found == ","
        ));
    }

    #[test]
    fn greater_and_less_than_compare_integer_labels() {
        assert!(selects("replicas>2", json!({"replicas": "3"})));
        assert!(!selects("replicas>2", json!({"replicas": "2"})));
        assert!(!selects("replicas>2", json!({"replicas": "many"})));
        assert!(!selects("replicas>2", json!({})));
        assert!(selects("replicas < -1", json!({"replicas": "-5"})));
        assert!(matches!(
            LabelSelector::parse("replicas>two").unwrap_err(),
            SelectorError::InvalidLabelValue { value, .. } if value == "two"
        ));
    }

    #[test]
    fn display_is_the_canonical_form() {
        let selector = LabelSelector::parse("a==1 , b notin (z,y),!c, d in (x)").unwrap();
        assert_eq!(selector.to_string(), "a=1,b notin (y,z),!c,d in (x)");
    }

    #[test]
    fn field_selector_supports_name_and_namespace() {
        let object = json!({"metadata": {"name": "web", "namespace": "prod"}});
        let matches = |s: &str| FieldSelector::parse(s).unwrap().matches(&object);
        assert!(matches(""));
        assert!(matches("metadata.name=web"));
        assert!(matches("metadata.name==web,metadata.namespace=prod"));
        assert!(matches("metadata.namespace!=dev"));
        assert!(!matches("metadata.name=db"));
        assert!(!matches("metadata.name=web,metadata.namespace!=prod"));
    }

    #[test]
    fn field_selector_treats_a_missing_namespace_as_empty() {
        let cluster_scoped = json!({"metadata": {"name": "default"}});
        assert!(
            FieldSelector::parse("metadata.namespace=")
                .unwrap()
                .matches(&cluster_scoped)
        );
        assert!(
            !FieldSelector::parse("metadata.namespace=x")
                .unwrap()
                .matches(&cluster_scoped)
        );
    }

    #[test]
    fn field_selector_unescapes_values() {
        let selector = FieldSelector::parse(r"metadata.name=a\,b\=c").unwrap();
        assert_eq!(selector.requirements()[0].value, "a,b=c");
        assert!(selector.matches(&json!({"metadata": {"name": "a,b=c"}})));
    }

    #[test]
    fn unsupported_field_is_an_error_naming_the_field() {
        let error = FieldSelector::parse("metadata.name=a,spec.nodeName=n1").unwrap_err();
        assert_eq!(
            error,
            SelectorError::UnsupportedField {
                field: "spec.nodeName".into()
            }
        );
        assert_eq!(
            error.to_string(),
            "field label not supported: spec.nodeName"
        );
    }

    #[test]
    fn field_term_without_operator_is_rejected() {
        assert_eq!(
            FieldSelector::parse("metadata.name").unwrap_err(),
            SelectorError::InvalidFieldTerm {
                term: "metadata.name".into()
            }
        );
    }

    fn label_key() -> impl Strategy<Value = String> {
        (
            prop::option::of("[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z]{1,4}){0,2}"),
            "[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?",
        )
            .prop_map(|(prefix, name)| match prefix {
                Some(prefix) => format!("{prefix}/{name}"),
                None => name,
            })
            .prop_filter("in and notin are operators", |k| k != "in" && k != "notin")
    }

    fn label_value() -> impl Strategy<Value = String> {
        "([A-Za-z0-9]([A-Za-z0-9_.-]{0,8}[A-Za-z0-9])?)?"
    }

    fn requirement() -> impl Strategy<Value = Requirement> {
        let values = || prop::collection::btree_set(label_value(), 1..4);
        prop_oneof![
            (label_key(), label_value()).prop_map(|(k, v)| Requirement::Equals(k, v)),
            (label_key(), label_value()).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
            (label_key(), values()).prop_map(|(k, v)| Requirement::In(k, v)),
            (label_key(), values()).prop_map(|(k, v)| Requirement::NotIn(k, v)),
            label_key().prop_map(Requirement::Exists),
            label_key().prop_map(Requirement::DoesNotExist),
            (label_key(), any::<i64>()).prop_map(|(k, n)| Requirement::GreaterThan(k, n)),
            (label_key(), any::<i64>()).prop_map(|(k, n)| Requirement::LessThan(k, n)),
        ]
    }

    proptest! {
        #[test]
        fn label_selector_parses_its_own_display_output(
            requirements in prop::collection::vec(requirement(), 0..5)
        ) {
            let selector = LabelSelector { requirements };
            prop_assert_eq!(LabelSelector::parse(&selector.to_string()), Ok(selector));
        }

        #[test]
        fn not_equals_is_the_negation_of_equals(
            key in label_key(),
            value in label_value(),
            present in prop::option::of(label_value()),
        ) {
            let object_labels: Map<String, Value> =
                present.map(|v| (key.clone(), Value::from(v))).into_iter().collect();
            let selector = |r: Requirement| LabelSelector { requirements: vec![r] };
            let equals = selector(Requirement::Equals(key.clone(), value.clone()));
            let not_equals = selector(Requirement::NotEquals(key, value));
            let labels = Some(&object_labels);
            prop_assert_ne!(equals.matches(labels), not_equals.matches(labels));
        }
    }
}
