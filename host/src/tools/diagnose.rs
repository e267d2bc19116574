//! Why a sample reconcile failed, in words that name the fix: read from the failure, the text
//! the guest wrote while it ran (its own runtime's message, where the build lets it through)
//! and the language its component was written in.

use super::language::Language;
use crate::spelling::closest;
use crate::wasm::invoke::GuestFailure;

/// The export every reconciler has.
const EXPORT: &str = "reconcile";

/// What the guest's runtime or SDK said, and what a plugin author should do about a trap.
pub(super) fn explain(
    failure: &GuestFailure,
    chain: &str,
    guest: &[String],
    language: Language,
    javascript_names: &[String],
) -> String {
    match failure {
        GuestFailure::Deadline(_) | GuestFailure::Memory(_) | GuestFailure::TenantMemory(_) => {
            failure.to_string()
        }
        GuestFailure::Instantiate(_) => format!(
            "the component could not start (its initialization failed before `{EXPORT}` ran){}",
            said(guest)
        ),
        GuestFailure::Trapped(_) => trapped(chain, guest, language, javascript_names),
        GuestFailure::Returned(message) => format!("reconcile returned an error: {message}"),
    }
}

fn trapped(chain: &str, guest: &[String], language: Language, names: &[String]) -> String {
    if let Some(line) = find(guest, "where an Action was expected")
        .or_else(|| find(guest, "where an action was expected"))
        .or_else(|| find(guest, "no reconciler registered"))
        .or_else(|| find(guest, "exports no function `reconcile`"))
    {
        // The SDKs' glue says what is wrong and how to fix it.
        return format!("{}{}", strip_prefixes(line), said(guest));
    }
    if let Some(line) = find(guest, "KeyError(<class '") {
        let returned = line
            .split("KeyError(<class '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or("a value");
        return format!(
            "reconcile returned {returned} where an Action was expected; return done(), \
             requeue() or requeue_after(seconds) (reconcile_guest), or \
             types.Action_Done()/Action_Requeue()/Action_RequeueAfter(ms) with the raw \
             bindings{}",
            said(guest)
        );
    }
    if find(guest, "has no attribute 'reconcile'").is_some() {
        return format!(
            "the Python module exports no function `{EXPORT}`: its `WitWorld` class has no \
             method `{EXPORT}`; end the app module with `WitWorld = \
             export_reconciler(reconcile)` (reconcile_guest), or name the raw bindings' method \
             `def {EXPORT}(self, request)`{}",
            said(guest)
        );
    }
    if chain.contains("unexpected discriminant") || chain.contains("invalid expected discriminant")
    {
        return format!(
            "reconcile returned a value the host cannot read as `result<action, \
             reconcile-error>`: an action tag other than done, requeue or requeue-after (in C, \
             set `action->tag` to one of the KUBE_RECONCILE_TYPES_ACTION_* constants before \
             returning true){}",
            said(guest)
        );
    }
    if language == Language::JavaScript && !names.iter().any(|name| name == EXPORT) {
        let guess = closest(EXPORT, names)
            .map(|name| format!("; did you mean `{name}`?"))
            .unwrap_or_default();
        return format!(
            "the JavaScript module exports no function `{EXPORT}`{guess} Write `export \
             function {EXPORT}(request)`, or `export const {EXPORT} = reconciler(yourFunction)` \
             with guest-sdk/javascript/reconciler.js{}",
            said(guest)
        );
    }
    let generic = match language {
        Language::JavaScript => {
            "the JavaScript engine trapped: a thrown Error instance or a return value that is \
             not an action ({tag: 'done'}, {tag: 'requeue'}, {tag: 'requeue-after', val: ms}); \
             throw {message} for a reconcile error, or wrap the function with `reconciler()` \
             from guest-sdk/javascript/reconciler.js, which names the mistake in the log"
        }
        Language::Python => {
            "the Python module raised an exception outside reconcile_guest's error handling \
             (what it wrote is below); wrap the function with \
             `export_reconciler(reconcile)`, which turns exceptions into reconcile errors"
        }
        Language::Go => {
            "the Go runtime stopped (a panic outside the SDK's recovery, or a fatal error); \
             what it wrote below shows where"
        }
        Language::Rust => {
            "the Rust reconciler panicked (what it wrote below shows where); return Err(...) \
             for a failure the host should retry"
        }
        Language::C => {
            "the C reconciler stopped: a failed assert(), abort(), or a trap such as an \
             out-of-bounds access (what it wrote below shows where); return false with \
             `error->message` set for a failure the host should retry"
        }
        Language::Other => {
            "a trap is a bug in the component (an `unreachable`, an out-of-bounds access, an \
             invalid value returned); run `reconcile-host reconcile MANIFEST --object SAMPLE` \
             to see the calls it made first"
        }
    };
    format!("{generic}{}", said(guest))
}

/// The guest line holding `needle`.
fn find<'a>(guest: &'a [String], needle: &str) -> Option<&'a str> {
    guest
        .iter()
        .rev()
        .find(|line| line.contains(needle))
        .map(String::as_str)
}

/// A glue message without the runtime's framing (`panic: `, `TypeError: `).
fn strip_prefixes(line: &str) -> &str {
    let line = line.trim();
    let line = line.strip_prefix("panic: ").unwrap_or(line);
    match line.split_once(": ") {
        Some((head, rest))
            if head.ends_with("Error") && !head.contains(' ') && !rest.is_empty() =>
        {
            rest
        }
        _ => line,
    }
}

/// The guest's last lines, quoted, or nothing.
fn said(guest: &[String]) -> String {
    const LAST: usize = 12;
    let lines: Vec<&str> = guest
        .iter()
        .map(|line| line.trim_end())
        .filter(|line| !line.is_empty())
        .collect();
    if lines.is_empty() {
        return "\nthe guest wrote nothing before it stopped".to_owned();
    }
    let skip = lines.len().saturating_sub(LAST);
    let mut out = "\nthe guest wrote:".to_owned();
    for line in &lines[skip..] {
        out.push_str("\n  | ");
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::invoke::GuestText;

    fn trap() -> GuestFailure {
        GuestFailure::Trapped(GuestText::new(
            "wasm trap: wasm `unreachable` instruction executed",
        ))
    }

    #[test]
    fn a_python_return_of_the_wrong_type_names_the_type_and_the_actions() {
        let guest = [
            "thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1640:18:".to_owned(),
            "called `Result::unwrap()` on an `Err` value: PyErr { type: <class 'KeyError'>, \
             value: KeyError(<class 'str'>), traceback: None }"
                .to_owned(),
        ];
        let text = explain(&trap(), "", &guest, Language::Python, &[]);
        assert!(
            text.starts_with("reconcile returned str where an Action was expected; return done()"),
            "{text}"
        );
    }

    #[test]
    fn a_misspelled_javascript_export_is_named() {
        let names = ["request".to_owned(), "reconcle".to_owned()];
        let text = explain(&trap(), "", &[], Language::JavaScript, &names);
        assert!(
            text.starts_with(
                "the JavaScript module exports no function `reconcile`; did you mean \
                 `reconcle`? Write `export function reconcile(request)`"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("the guest wrote nothing before it stopped"),
            "{text}"
        );
    }

    #[test]
    fn an_sdk_message_is_the_explanation() {
        let guest = [
            "TypeError: reconcile returned str ('done') where an Action was expected; \
                      return done()"
                .to_owned(),
        ];
        let text = explain(&trap(), "", &guest, Language::Python, &[]);
        assert!(
            text.starts_with("reconcile returned str ('done') where an Action was expected;"),
            "{text}"
        );
        let chain = "the guest trapped: unexpected discriminant: 7";
        let text = explain(&trap(), chain, &[], Language::Other, &[]);
        assert!(text.contains("KUBE_RECONCILE_TYPES_ACTION_*"), "{text}");
    }
}
