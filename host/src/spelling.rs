//! "Did you mean …?": the likely intended name for a misspelled one, by edit distance, and the
//! hint added to serde's "unknown field" and "unknown variant" messages.

/// The name in `names` closest to `wanted` by edit distance, if it is a plausible misspelling
/// (at most a third of `wanted`'s letters differ).
#[must_use]
pub fn closest<'a, S: AsRef<str>>(wanted: &str, names: &'a [S]) -> Option<&'a str> {
    names
        .iter()
        .map(|name| (distance(wanted, name.as_ref()), name.as_ref()))
        .filter(|(d, _)| *d > 0 && *d <= wanted.len().div_ceil(3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// Levenshtein distance (a change of case counts as a change).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant", or "expected
/// `a` or `b`") with "; did you mean `a`?" after the unknown name when one of those is close;
/// any other message unchanged.
#[must_use]
pub fn with_suggestion(message: &str) -> String {
    let Some((before, unknown, after)) =
        ["unknown field `", "unknown variant `"]
            .iter()
            .find_map(|lead| {
                let start = message.find(lead)? + lead.len();
                let len = message[start..].find('`')?;
                Some((
                    &message[..start + len + 1],
                    &message[start..start + len],
                    &message[start + len + 1..],
                ))
            })
    else {
        return message.to_owned();
    };
    // The names expected: the backticked words up to the position (` at line …`), if any.
    let listed = after.split(" at line ").next().unwrap_or(after);
    let names: Vec<&str> = listed.split('`').skip(1).step_by(2).collect();
    match closest(unknown, &names) {
        Some(name) => format!("{before} (did you mean `{name}`?){after}"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_name_is_found_and_an_unrelated_one_is_not() {
        let names = vec!["reconcle".to_owned(), "main".to_owned()];
        assert_eq!(closest("reconcile", &names), Some("reconcle"));
        assert_eq!(closest("reconcile", &["render".to_owned()]), None);
        assert_eq!(
            closest("reconcile", &["Reconcile".to_owned()]),
            Some("Reconcile")
        );
    }

    #[test]
    fn serdes_unknown_field_and_variant_messages_get_the_likely_name() {
        assert_eq!(
            with_suggestion(
                "limits: unknown field `dedline`, expected one of `deadline`, `memory` at line 4 \
                 column 10"
            ),
            "limits: unknown field `dedline` (did you mean `deadline`?), expected one of \
             `deadline`, `memory` at line 4 column 10"
        );
        assert_eq!(
            with_suggestion("unknown variant `hole`, expected `keys` or `whole`"),
            "unknown variant `hole` (did you mean `whole`?), expected `keys` or `whole`"
        );
        let far = "unknown field `zzz`, expected one of `name`, `module`";
        assert_eq!(with_suggestion(far), far);
        assert_eq!(
            with_suggestion("missing field `for`"),
            "missing field `for`"
        );
    }
}
