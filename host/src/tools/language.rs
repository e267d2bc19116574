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
}
