//! A reconcile's span, when tracing is on: the root of its own trace, linked to each cause's
//! span (the watch event, the reconcile that asked for a requeue, the swap, the handover), ended
//! with the outcome.

use opentelemetry::trace::{Link, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};

use super::causes::{Taken, Why};
use super::key::ObjectKey;
use crate::telemetry::traces;

/// Starts the span of a reconcile of `key` by `controller`; `None` when tracing is off.
pub(super) fn start(
    controller: &str,
    key: &ObjectKey,
    requeues: u32,
    causes: &Taken,
) -> Option<Context> {
    let tracer = traces::tracer()?;
    let links: Vec<Link> = causes
        .causes
        .iter()
        .filter_map(|cause| {
            let context = cause.link.clone()?;
            let attributes = vec![KeyValue::new("reconcile.cause", cause.why.name())];
            Some(Link::new(context, attributes, 0))
        })
        .collect();
    let why: Vec<&str> = causes.causes.iter().map(|cause| cause.why.name()).collect();
    let mut attributes = vec![
        KeyValue::new("reconcile.controller", controller.to_owned()),
        KeyValue::new("reconcile.key", key.to_string()),
        KeyValue::new("reconcile.retries", i64::from(requeues)),
        KeyValue::new("reconcile.causes", why.join(",")),
    ];
    if let Some(namespace) = key.namespace() {
        attributes.push(KeyValue::new("k8s.namespace.name", namespace.to_owned()));
    }
    let span = tracer
        .span_builder("reconcile")
        .with_kind(SpanKind::Internal)
        .with_links(links)
        .with_attributes(attributes)
        .start_with_context(tracer, &Context::new());
    Some(Context::new().with_span(span))
}

/// Ends the span with `outcome` (the `result` label); the span context a requeue it asked for links back to.
pub(super) fn end(
    trace: Option<&Context>,
    outcome: &'static str,
    again: Option<&Why>,
) -> Option<SpanContext> {
    let trace = trace?;
    let span = trace.span();
    span.set_attribute(KeyValue::new("reconcile.outcome", outcome));
    match again {
        Some(Why::RequeueAfter(delay)) => {
            let millis = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
            span.set_attribute(KeyValue::new("reconcile.requeue_after_ms", millis));
        }
        Some(Why::Retry(error)) => span.set_status(Status::error(error.clone())),
        _ => {}
    }
    let context = span.span_context().clone();
    span.end();
    Some(context)
}

/// Ends the span of a reconcile cut off (the term ended, or the key was taken away).
pub(super) fn aborted(trace: Option<&Context>) {
    if let Some(trace) = trace {
        let span = trace.span();
        span.set_attribute(KeyValue::new("reconcile.outcome", "aborted"));
        span.end();
    }
}
