//! What label keys, label values and DNS names look like, as Kubernetes validates them.

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
#[must_use]
pub fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// Whether `text` is a DNS-1123 subdomain: dot-separated DNS labels, at most 253 characters.
#[must_use]
pub fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// Checks a label key: `name` or `prefix/name`, the prefix a DNS subdomain.
pub(crate) fn validate_key(key: &str) -> Result<(), String> {
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
pub(crate) fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!("a label value is empty or {NAME_RULE}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_are_lowercase_alphanumeric_with_inner_dashes() {
        for good in ["a", "a-b", "0", "x1", &"k".repeat(63)] {
            assert!(is_dns_label(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"k".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn dns_subdomains_are_dotted_labels_up_to_253_characters() {
        assert!(is_dns_subdomain("example.com"));
        assert!(is_dns_subdomain("a"));
        assert!(!is_dns_subdomain("example..com"));
        assert!(!is_dns_subdomain(".com"));
        assert!(!is_dns_subdomain("Example.com"));
        let long = vec!["a".repeat(63); 4].join(".");
        assert_eq!(long.len(), 255);
        assert!(!is_dns_subdomain(&long));
    }

    #[test]
    fn keys_are_a_name_with_an_optional_prefix() {
        assert!(validate_key("app").is_ok());
        assert!(validate_key("app.kubernetes.io/name").is_ok());
        assert!(validate_key("A_b.c-D").is_ok());
        assert!(validate_key("prefix/").unwrap_err().contains("the name ``"));
        assert!(validate_key("").unwrap_err().contains("the name ``"));
        assert!(
            validate_key("a/b/c")
                .unwrap_err()
                .contains("at most one `/`")
        );
    }

    #[test]
    fn values_may_be_empty() {
        assert!(validate_value("").is_ok());
        assert!(validate_value("web-1").is_ok());
        assert!(validate_value("_x").is_err());
        assert!(validate_value(&"v".repeat(64)).is_err());
    }
}
