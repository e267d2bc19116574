//! Which language a component was written in, guessed from the runtime it carries, and the
//! names a JavaScript component's module exports: what `check` needs to word its hints.

/// The guest languages the project has toolchains for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Language {
    /// componentize-py (CPython inside).
    Python,
    /// componentize-qjs (QuickJS) or componentize-js (SpiderMonkey).
    JavaScript,
    /// The standard Go toolchain with wit-bindgen go.
    Go,
    /// Rust with wit-bindgen.
    Rust,
    /// C with wit-bindgen's C bindings (clang and wasi-libc).
    C,
    /// A language we do not recognize.
    Other,
}

impl Language {
    /// Guesses the language from markers its runtime leaves in the component's bytes.
    pub(super) fn detect(bytes: &[u8]) -> Self {
        if contains(bytes, b"componentize_py_runtime") {
            Self::Python
        } else if contains(bytes, b"QuickJS") || contains(bytes, b"StarlingMonkey") {
            Self::JavaScript
        } else if contains(bytes, b"runtime.gopanic") {
            Self::Go
        } else if contains(bytes, b"__wasm_export_exports_reconciler_reconcile") {
            // Before Rust: the WASI adapter a C component may carry is built with rustc.
            Self::C
        } else if contains(bytes, b"rust_panic") || contains(bytes, b"rustc") {
            Self::Rust
        } else {
            Self::Other
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// The names a JavaScript component's source declares — functions and `const`, `let`, `var`
/// and `as` bindings — read from the source text the JavaScript toolchains keep in the
/// component (QuickJS keeps it in its heap snapshot, where it may be cut into pieces, so an
/// `export` keyword is not always next to its name); empty for other components.
pub(super) fn javascript_names(bytes: &[u8]) -> Vec<String> {
    const PREFIXES: [&[u8]; 5] = [b"function ", b"const ", b"let ", b"var ", b" as "];
    let mut names = Vec::new();
    for prefix in PREFIXES {
        let mut rest = bytes;
        while let Some(at) = rest.windows(prefix.len()).position(|w| w == prefix) {
            rest = &rest[at + prefix.len()..];
            let name: String = rest
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'$')
                .map(|b| char::from(*b))
                .collect();
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The name in `names` closest to `wanted` by edit distance, if it is a plausible misspelling
/// (at most a third of `wanted`'s letters differ).
pub(super) fn closest<'a>(wanted: &str, names: &'a [String]) -> Option<&'a str> {
    names
        .iter()
        .map(|name| (distance(wanted, name), name))
        .filter(|(d, _)| *d > 0 && *d <= wanted.len().div_ceil(3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name.as_str())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javascript_names_are_read_from_the_embedded_source() {
        let bytes = b"\0\x01xport function reconcle(request) {}\0export const helper = 1;\
                      export async function later() {}";
        assert_eq!(javascript_names(bytes), ["reconcle", "later", "helper"]);
        assert_eq!(Language::detect(b"..QuickJS.."), Language::JavaScript);
        assert_eq!(Language::detect(b"nothing known"), Language::Other);
    }

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
}
