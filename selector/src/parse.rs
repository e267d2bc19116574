//! The selector language's tokenizer and recursive-descent parser, following apimachinery's.

use crate::error::SelectorError;
use crate::requirement::{Operator, Requirement};
use crate::validate::{validate_key, validate_value};

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
pub(crate) struct Parser<'a> {
    text: &'a str,
    tokens: Vec<(usize, Token<'a>)>,
    next: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
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

    /// The requirements in written order.
    pub(crate) fn parse(mut self) -> Result<Vec<Requirement>, SelectorError> {
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

#[cfg(test)]
mod tests {
    use crate::{LabelSelector, SelectorError};

    fn error(selector: &str) -> String {
        LabelSelector::parse(selector)
            .expect_err(selector)
            .to_string()
    }

    #[test]
    fn whitespace_around_tokens_is_ignored() {
        let spaced = LabelSelector::parse("  a  ==  1 ,  b  in  (  x  ,  y  )  ,  !  c  ").unwrap();
        let tight = LabelSelector::parse("a=1,b in (x,y),!c").unwrap();
        assert_eq!(spaced, tight);
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
            (
                "app=web)",
                "label selector `app=web)`: expected `,` or the end after `web`, found `)`",
            ),
            (
                "app between (a)",
                "label selector `app between (a)`: expected `=`, `==`, `!=`, `in`, `notin`, \
                 `>`, `<`, `,` or the end after `app`, found `between`",
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
            ("app in (ok,b@d)", "`b@d` is not a valid value"),
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
    fn invalid_keys_are_refused_naming_the_key() {
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
                matches!(&error, SelectorError::InvalidKey { key, .. } if key == bad),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains(bad), "{error}");
        }
    }

    #[test]
    fn invalid_values_are_refused_naming_the_value() {
        let error = LabelSelector::parse("app=-web").unwrap_err();
        assert!(matches!(&error, SelectorError::InvalidValue { value, .. } if value == "-web"));
        let error = LabelSelector::parse("replicas>two").unwrap_err();
        assert!(matches!(&error, SelectorError::NotAnInteger { value, .. } if value == "two"));
    }
}
