//! A traced guest call's spans: each host import a child span of the reconcile's, each API
//! request a client span whose W3C `traceparent` rides on the request, and the guest's log
//! lines events of the reconcile span. Nothing happens when the call is not traced.

use std::time::{Instant, SystemTime};

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};

use crate::telemetry::traces;
use crate::wasm::api::{ApiResult, Target};
use crate::wasm::cost::Import;
use crate::wasm::guest_log::{MAX_LINE, prefix};

tokio::task_local! {
    /// The `traceparent` of the API request being made on this task, if traced.
    static TRACEPARENT: String;
}

/// The `traceparent` the API request being made now carries, if any.
#[must_use]
pub fn current_traceparent() -> Option<String> {
    TRACEPARENT.try_with(Clone::clone).ok()
}

/// A child span of `call`'s reconcile span for `import`, from `started` to now.
pub fn import_span(call: &Context, import: Import, started: Instant) {
    let Some(tracer) = traces::tracer() else {
        return;
    };
    let start = SystemTime::now()
        .checked_sub(started.elapsed())
        .unwrap_or_else(SystemTime::now);
    let mut span = tracer
        .span_builder(import.label())
        .with_kind(SpanKind::Internal)
        .with_start_time(start)
        .start_with_context(tracer, call);
    span.end();
}

/// How a guest's `log` message sets an attribute of its reconcile span:
/// `span.attribute <name>=<value>` sets `guest.<name>` to `<value>`.
pub const ATTRIBUTE_PREFIX: &str = "span.attribute ";

/// The name and value of a `span.attribute <name>=<value>` message; the name 1–64 ASCII
/// letters, digits, `_`, `.` or `-`.
fn attribute(message: &str) -> Option<(&str, &str)> {
    let (name, value) = message.strip_prefix(ATTRIBUTE_PREFIX)?.split_once('=')?;
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    valid.then_some((name, value))
}

/// The guest logged `message` at `level`: an event of the reconcile span, or, for
/// `span.attribute <name>=<value>` ([`ATTRIBUTE_PREFIX`]), its attribute `guest.<name>`. The
/// message is cut at [`MAX_LINE`] bytes first, as the host's log cuts it.
pub fn log_event(call: &Context, level: &str, message: &str) {
    let span = call.span();
    if !span.span_context().is_valid() {
        return;
    }
    let message = prefix(message, MAX_LINE);
    if let Some((name, value)) = attribute(message) {
        span.set_attribute(KeyValue::new(format!("guest.{name}"), value.to_owned()));
    } else {
        span.add_event(
            "guest.log",
            vec![
                KeyValue::new("log.level", level.to_owned()),
                KeyValue::new("log.message", message.to_owned()),
            ],
        );
    }
}

/// Performs `request` (an API call of `verb` on `target`) in a client span that is a child of
/// `call`'s reconcile span, the span's `traceparent` on the request; untraced without `call`.
pub async fn api_request(
    call: Option<&Context>,
    verb: &str,
    target: &Target,
    request: impl Future<Output = ApiResult>,
) -> ApiResult {
    let Some((call, tracer)) = call.zip(traces::tracer()) else {
        return request.await;
    };
    let mut attributes = vec![
        KeyValue::new("k8s.verb", verb.to_owned()),
        KeyValue::new("k8s.kind", target.kind.to_string()),
        KeyValue::new("k8s.object.name", target.name.clone()),
    ];
    if let Some(namespace) = &target.namespace {
        attributes.push(KeyValue::new("k8s.namespace.name", namespace.clone()));
    }
    let span = tracer
        .span_builder(format!("{verb} {}", target.kind.kind))
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(tracer, call);
    let context = call.with_span(span);
    let result = match traces::traceparent(&context) {
        Some(parent) => TRACEPARENT.scope(parent, request).await,
        None => request.await,
    };
    let span = context.span();
    if let Err(error) = &result {
        span.set_status(Status::error(error.to_string()));
    }
    span.end();
    result
}

#[cfg(test)]
mod tests {
    use super::attribute;
    use crate::wasm::guest_log::MAX_LINE;

    #[test]
    fn a_span_attribute_message_names_a_short_plain_attribute() {
        assert_eq!(attribute("span.attribute shard=3"), Some(("shard", "3")));
        assert_eq!(
            attribute("span.attribute db.rows=1=2"),
            Some(("db.rows", "1=2"))
        );
        assert_eq!(attribute("span.attribute empty="), Some(("empty", "")));
        for other in [
            "hello",
            "span.attribute noequals",
            "span.attribute =v",
            "span.attribute a b=c",
            "span.attributes x=1",
        ] {
            assert_eq!(attribute(other), None, "{other}");
        }
        let long = format!("span.attribute {}=v", "n".repeat(65));
        assert_eq!(attribute(&long), None);
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let text = format!("{}é", "a".repeat(MAX_LINE - 1));
        assert_eq!(super::prefix(&text, MAX_LINE), &text[..MAX_LINE - 1]);
        assert_eq!(super::prefix("short", MAX_LINE), "short");
    }
}
