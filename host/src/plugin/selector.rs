//! Kubernetes label selectors (`app=web,tier notin (db)`), parsed and matched in the host.
//!
//! The syntax and the matching rules are those of apimachinery's `labels.Parse`: requirements are
//! separated by commas and all must hold; `!=` and `notin` also match objects without the key.

use std::fmt;
use std::str::FromStr;

/// A parsed label selector: every requirement must hold for an object to match.
///
/// The empty selector matches every object. Requirements are sorted by key, as Kubernetes sorts
/// them (requirements on one key keep their written order), so [`Display`](fmt::Display) prints
/// one canonical form that parses back to an equal selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

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

impl LabelSelector {
    /// Parses a selector written as for `kubectl get -l`; the empty (or blank) text selects
    /// everything.
    ///
    /// # Errors
    /// [`SelectorError`] naming the selector, the offending token and what was expected.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Parser::new(text).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether an object with these labels is selected. `labels` are `(key, value)` pairs as the
    /// host's cache stores them (`CachedObject::labels`); their order does not matter.
    #[must_use]
    pub fn matches(&self, labels: &[(Box<str>, Box<str>)]) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = labels
                .iter()
                .find(|(key, _)| **key == *requirement.key)
                .map(|(_, value)| &**value);
            requirement.matches(value)
        })
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

/// A lexical token of the selector language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    /// A run of characters that are neither whitespace nor one of `=!(),<>`; `in` and `notin`
    /// are identifiers too and become operators by position.
    Identifier(&'a str),
    /// `!`
    Not,
    /// `=`
    Equals,
    /// `==`
    DoubleEquals,
    /// `!=`
    NotEquals,
    /// `>`
    Greater,
    /// `<`
    Less,
    /// `(`
    Open,
    /// `)`
    Close,
    /// `,`
    Comma,
    /// The end of the text.
    End,
}

impl Token<'_> {
    fn text(self) -> Option<String> {
        let text = match self {
            Token::Identifier(text) => text,
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Greater => ">",
            Token::Less => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::End => return None,
        };
        Some(text.to_owned())
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>')
}

/// Splits the whole text into tokens with their byte offsets, ending with [`Token::End`].
fn tokenize(text: &str) -> Vec<(usize, Token<'_>)> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        chars.next();
        let next_is = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, want| {
            chars.next_if(|&(_, c)| c == want).is_some()
        };
        let token = match c {
            c if c.is_whitespace() => continue,
            '=' if next_is(&mut chars, '=') => Token::DoubleEquals,
            '=' => Token::Equals,
            '!' if next_is(&mut chars, '=') => Token::NotEquals,
            '!' => Token::Not,
            '>' => Token::Greater,
            '<' => Token::Less,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            _ => {
                while chars
                    .next_if(|&(_, c)| !(c.is_whitespace() || is_special(c)))
                    .is_some()
                {}
                let end = chars.peek().map_or(text.len(), |&(i, _)| i);
                Token::Identifier(&text[start..end])
            }
        };
        tokens.push((start, token));
    }
    tokens.push((text.len(), Token::End));
    tokens
}

const START_OF_REQUIREMENT: &str = "a label key or `!key`";
const OPERATOR: &str = "`=`, `==`, `!=`, `in`, `notin`, `>`, `<`, `,` or the end";

/// A recursive-descent parser over the token list, following apimachinery's `Parser`.
struct Parser<'a> {
    text: &'a str,
    tokens: Vec<(usize, Token<'a>)>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            tokens: tokenize(text),
            next: 0,
        }
    }

    fn peek(&self) -> Token<'a> {
        self.tokens[self.next].1
    }

    fn advance(&mut self) -> Token<'a> {
        let token = self.peek();
        if token != Token::End {
            self.next += 1;
        }
        token
    }

    /// The error for the token about to be read.
    fn unexpected(&self, expected: &'static str) -> SelectorError {
        let (position, found) = self.tokens[self.next];
        let after = self
            .next
            .checked_sub(1)
            .and_then(|previous| self.tokens[previous].1.text());
        SelectorError::Unexpected {
            selector: self.text.to_owned(),
            position,
            expected,
            after,
            found: found.text(),
        }
    }

    fn parse(mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        if self.peek() == Token::End {
            return Ok(requirements);
        }
        loop {
            requirements.push(self.requirement()?);
            match self.peek() {
                Token::End => return Ok(requirements),
                Token::Comma => {
                    self.advance();
                }
                _ => return Err(self.unexpected("`,` or the end")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let negated = self.peek() == Token::Not;
        if negated {
            self.advance();
        }
        let Token::Identifier(key) = self.peek() else {
            return Err(self.unexpected(START_OF_REQUIREMENT));
        };
        self.advance();
        validate_key(key).map_err(|reason| SelectorError::InvalidKey {
            selector: self.text.to_owned(),
            key: key.to_owned(),
            reason,
        })?;
        let unary = |operator| Requirement {
            key: key.to_owned(),
            operator,
            values: Vec::new(),
        };
        if negated {
            return Ok(unary(Operator::DoesNotExist));
        }
        let operator = match self.peek() {
            Token::End | Token::Comma => return Ok(unary(Operator::Exists)),
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::Greater => Operator::GreaterThan,
            Token::Less => Operator::LessThan,
            Token::Identifier("in") => Operator::In,
            Token::Identifier("notin") => Operator::NotIn,
            _ => return Err(self.unexpected(OPERATOR)),
        };
        self.advance();
        let mut values = match operator {
            Operator::In | Operator::NotIn => self.value_list()?,
            _ => vec![self.exact_value()?],
        };
        values.sort_unstable();
        values.dedup();
        for value in &values {
            validate_value(value).map_err(|reason| SelectorError::InvalidValue {
                selector: self.text.to_owned(),
                key: key.to_owned(),
                value: value.clone(),
                reason,
            })?;
        }
        if matches!(operator, Operator::GreaterThan | Operator::LessThan)
            && values[0].parse::<i64>().is_err()
        {
            return Err(SelectorError::NotAnInteger {
                selector: self.text.to_owned(),
                key: key.to_owned(),
                value: values[0].clone(),
            });
        }
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; nothing before `,` or the end means "".
    fn exact_value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            Token::End | Token::Comma => Ok(String::new()),
            Token::Identifier(value) => {
                self.advance();
                Ok(value.to_owned())
            }
            _ => Err(self.unexpected("a value")),
        }
    }

    /// `(a,b)`; as in Kubernetes, an empty slot (`()`, `(a,)`, `(,a)`) is the empty value.
    fn value_list(&mut self) -> Result<Vec<String>, SelectorError> {
        if self.peek() != Token::Open {
            return Err(self.unexpected("`(`"));
        }
        self.advance();
        let mut values = Vec::new();
        let mut slot_filled = false;
        loop {
            match self.peek() {
                Token::Identifier(value) if !slot_filled => {
                    values.push(value.to_owned());
                    slot_filled = true;
                }
                Token::Comma => {
                    if !slot_filled {
                        values.push(String::new());
                    }
                    slot_filled = false;
                }
                Token::Close => {
                    if !slot_filled {
                        values.push(String::new());
                    }
                    self.advance();
                    return Ok(values);
                }
                Token::End => return Err(self.unexpected("`)`")),
                _ if slot_filled => return Err(self.unexpected("`,` or `)`")),
                _ => return Err(self.unexpected("a value, `,` or `)`")),
            }
            self.advance();
        }
    }
}

/// What a label key's name part and a label value look like.
const NAME_RULE: &str = "63 characters or less, beginning and ending with a letter or digit, \
                         with only letters, digits, `-`, `_` and `.` in between";

fn is_label_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `text` is a DNS-1123 label: lowercase letters, digits and `-`, at most 63
/// characters, starting and ending with a letter or digit.
pub(crate) fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// Whether `text` is a DNS-1123 subdomain: dot-separated DNS labels, at most 253 characters.
pub(crate) fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// Checks a label key: `name` or `prefix/name`, the prefix a DNS subdomain.
fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if name.contains('/') {
            return Err("a key has at most one `/`, between a prefix and a name".to_owned());
        }
        if !is_dns_subdomain(prefix) {
            return Err(format!(
                "the prefix `{prefix}` must be a lowercase DNS subdomain like `example.com`"
            ));
        }
    }
    if is_label_name(name) {
        Ok(())
    } else {
        Err(format!(
            "the name `{name}` must be {NAME_RULE}; a key is `name` or `prefix/name`, e.g. \
             `app` or `app.kubernetes.io/name`"
        ))
    }
}

/// Checks a label value, which may be empty.
fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!("a label value is empty or {NAME_RULE}"))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(Box<str>, Box<str>)> {
        pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    fn selects(selector: &str, pairs: &[(&str, &str)]) -> bool {
        LabelSelector::parse(selector)
            .unwrap_or_else(|e| panic!("{e}"))
            .matches(&labels(pairs))
    }

    fn error(selector: &str) -> String {
        LabelSelector::parse(selector)
            .expect_err(selector)
            .to_string()
    }

    #[test]
    fn the_empty_selector_matches_everything() {
        for text in ["", "   ", "\t\n"] {
            let selector = LabelSelector::parse(text).unwrap();
            assert!(selector.is_empty());
            assert!(selector.matches(&[]));
            assert!(selector.matches(&labels(&[("app", "web")])));
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
    fn whitespace_around_tokens_is_ignored() {
        let spaced = LabelSelector::parse("  a  ==  1 ,  b  in  (  x  ,  y  )  ,  !  c  ").unwrap();
        let tight = LabelSelector::parse("a=1,b in (x,y),!c").unwrap();
        assert_eq!(spaced, tight);
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
    fn syntax_errors_name_the_selector_the_token_and_what_was_expected() {
        for (text, message) in [
            (
                "app in (a,b",
                "label selector `app in (a,b`: expected `)` after `b`",
            ),
            (
                "app in (a b)",
                "label selector `app in (a b)`: expected `,` or `)` after `a`, found `b`",
            ),
            (
                "app in a",
                "label selector `app in a`: expected `(` after `in`, found `a`",
            ),
            (
                "app in (=)",
                "label selector `app in (=)`: expected a value, `,` or `)` after `(`, found `=`",
            ),
            (
                ",app",
                "label selector `,app`: expected a label key or `!key` at the start, found `,`",
            ),
            (
                "app,",
                "label selector `app,`: expected a label key or `!key` after `,`",
            ),
            (
                "a b",
                "label selector `a b`: expected `=`, `==`, `!=`, `in`, `notin`, `>`, `<`, `,` \
                 or the end after `a`, found `b`",
            ),
            (
                "a=b=c",
                "label selector `a=b=c`: expected `,` or the end after `b`, found `=`",
            ),
            (
                "!a=b",
                "label selector `!a=b`: expected `,` or the end after `a`, found `=`",
            ),
            (
                "a=(b)",
                "label selector `a=(b)`: expected a value after `=`, found `(`",
            ),
            (
                "!",
                "label selector `!`: expected a label key or `!key` after `!`",
            ),
            (
                "a!",
                "label selector `a!`: expected `=`, `==`, `!=`, `in`, `notin`, `>`, `<`, `,` \
                 or the end after `a`, found `!`",
            ),
        ] {
            assert_eq!(error(text), message, "{text}");
        }
    }

    #[test]
    fn unexpected_tokens_carry_their_byte_offset() {
        let Err(SelectorError::Unexpected { position, .. }) = LabelSelector::parse("a in (x y)")
        else {
            panic!("expected a syntax error");
        };
        assert_eq!(position, 8);
        let Err(SelectorError::Unexpected { position, .. }) = LabelSelector::parse("a in (x")
        else {
            panic!("expected a syntax error");
        };
        assert_eq!(position, 7);
    }

    #[test]
    fn invalid_keys_and_values_are_refused_with_the_rule() {
        for (text, fragment) in [
            (
                "-app=x",
                "`-app` is not a label key: the name `-app` must be 63 characters",
            ),
            (
                "Example.com/app=x",
                "the prefix `Example.com` must be a lowercase DNS subdomain",
            ),
            ("/app=x", "the prefix `` must be a lowercase DNS subdomain"),
            ("a/b/c", "at most one `/`"),
            ("example.com/=x", "the name `` must be"),
            (
                "app=-x",
                "`-x` is not a valid value for label `app`: a label value is empty or",
            ),
            (
                "app in (ok, bad_)",
                "`bad_` is not a valid value for label `app`",
            ),
            ("app=a:b", "`a:b` is not a valid value"),
            ("n>x", "`n` is compared with `x`, which is not an integer"),
        ] {
            let message = error(text);
            assert!(
                message.starts_with(&format!("label selector `{text}`: ")),
                "{message}"
            );
            assert!(message.contains(fragment), "{text}: {message}");
        }
        assert!(error(&format!("{}=x", "k".repeat(64))).contains("63 characters or less"));
        assert!(error(&format!("k={}", "v".repeat(64))).contains("63 characters or less"));
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

    fn name() -> impl Strategy<Value = String> {
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?"
    }

    fn key() -> impl Strategy<Value = String> {
        (
            proptest::option::of("[a-z0-9]{1,5}(\\.[a-z0-9]{1,5}){0,2}"),
            name(),
        )
            .prop_map(|(prefix, name)| match prefix {
                Some(prefix) => format!("{prefix}/{name}"),
                None => name,
            })
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), name()]
    }

    fn requirement() -> impl Strategy<Value = String> {
        (
            key(),
            0..8_u8,
            proptest::collection::vec(value(), 1..4),
            0..1000_i64,
        )
            .prop_map(|(key, op, values, number)| match op {
                0 => key,
                1 => format!("!{key}"),
                2 => format!("{key} = {}", values[0]),
                3 => format!("{key}=={}", values[0]),
                4 => format!("{key} != {}", values[0]),
                5 => format!("{key} in ( {} )", values.join(" , ")),
                6 => format!("{key} notin ({})", values.join(",")),
                _ => format!("{key}{}{number}", if number % 2 == 0 { ">" } else { "<" }),
            })
    }

    proptest! {
        #[test]
        fn display_round_trips_through_parse(
            parts in proptest::collection::vec(requirement(), 0..5),
            labels in proptest::collection::vec((key(), value()), 0..5),
        ) {
            let selector = LabelSelector::parse(&parts.join(" , ")).unwrap();
            let canonical = selector.to_string();
            let reparsed = LabelSelector::parse(&canonical).unwrap();
            prop_assert_eq!(&reparsed, &selector);
            prop_assert_eq!(reparsed.to_string(), canonical);
            let labels: Vec<(Box<str>, Box<str>)> =
                labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
            prop_assert_eq!(reparsed.matches(&labels), selector.matches(&labels));
        }
    }
}
