//! Field selectors (`metadata.name=web,metadata.namespace!=dev`), parsed from the `fieldSelector`
//! query parameter and matched against objects.
//!
//! Comma-separated `field=value`, `field==value` or `field!=value` terms over `metadata.name` and
//! `metadata.namespace`, the fields every kind supports (kind-specific fields are in
//! `http/fields.rs`). `\,`, `\=` and `\\` escape those characters in values. The empty
//! string parses to a selector that matches everything. Label selectors are the
//! `label-selector` crate's, shared with the host.

use serde_json::Value;

/// Why a field selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldSelectorError {
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{term}'; can't understand '{term}'")]
    InvalidTerm {
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
    /// [`FieldSelectorError::InvalidTerm`] for a term without operator,
    /// [`FieldSelectorError::UnsupportedField`] (`field label not supported: <field>`) for a field
    /// other than `metadata.name` and `metadata.namespace`.
    pub fn parse(s: &str) -> Result<Self, FieldSelectorError> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for term in split_unescaped(s, ',') {
            let term = term.trim();
            let (field, op, value) =
                split_term(term).ok_or_else(|| FieldSelectorError::InvalidTerm {
                    term: term.to_owned(),
                })?;
            let field = match field.trim() {
                "metadata.name" => SelectableField::Name,
                "metadata.namespace" => SelectableField::Namespace,
                other => {
                    return Err(FieldSelectorError::UnsupportedField {
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
    use serde_json::json;

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
            FieldSelectorError::UnsupportedField {
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
            FieldSelectorError::InvalidTerm {
                term: "metadata.name".into()
            }
        );
    }
}
