//! OpenTelemetry traces of reconciles, exported over OTLP and configured by the standard
//! `OTEL_*` environment variables; off unless an OTLP endpoint is set.
//!
//! # What is traced
//! - One span per reconcile (`reconcile`), the root of its own trace, with a link to each of its
//!   causes: the watch event that queued the key (a short `watch <Kind> <EVENT>` span of its
//!   own), the reconcile that asked for a requeue, the module swap or the handover.
//! - One child span per host import call the guest makes (`client.patch`, `cache.get`, …).
//! - On every API request a guest's call makes, a W3C `traceparent` naming the import's span, so
//!   a kube-apiserver with tracing on puts its spans in the reconcile's trace.
//! - The guest's `log` calls as events of the reconcile span.
//!
//! # Settings
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` turns tracing on (and
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keeps it off);
//! `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL` is `http/protobuf` (the default) or `grpc`;
//! `OTEL_SERVICE_NAME` (default `reconcile-host`), `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER[_ARG]` and `OTEL_BSP_*` as the specification says.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanContext, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The tracer reconciles report to, once [`init_from_env`] turned tracing on.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// The tracer, when tracing is on: one atomic load when it is off; always `None` in a build
/// without the `traces` feature.
#[must_use]
pub fn tracer() -> Option<&'static SdkTracer> {
    if cfg!(feature = "traces") {
        TRACER.get()
    } else {
        None
    }
}

/// Keeps the exporter running; dropping it flushes what is buffered and stops it.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "traces: cannot flush the last spans");
        }
    }
}

/// Why tracing could not be turned on.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot build the OTLP trace exporter from the OTEL_* environment: {0}; fix \
     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_PROTOCOL (grpc or http/protobuf), or unset \
     them to run without traces"
)]
pub struct TracesError(String);

/// Whether the environment asks for traces: an OTLP endpoint set, and the SDK not disabled.
fn wanted(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| env(name).is_some_and(|value| !value.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Turns tracing on when the environment asks for it (see the module docs); `None` when it
/// does not. Call it once, inside the Tokio runtime (the gRPC exporter needs it).
///
/// # Errors
/// [`TracesError`] when the exporter cannot be built from the settings.
pub fn init_from_env() -> Result<Option<Traces>, TracesError> {
    if !wanted(&|name| std::env::var(name).ok()) {
        return Ok(None);
    }
    if !cfg!(feature = "traces") {
        return Err(TracesError(
            "this reconcile-host was built without the `traces` feature".to_owned(),
        ));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .build()
        .map_err(|error| TracesError(error.to_string()))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name("reconcile-host");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    tracing::info!("traces: exporting reconcile spans over OTLP (OTEL_* environment)");
    Ok(Some(install(provider)))
}

/// Traces reconciles to `provider` from now on (the first provider installed stays).
#[must_use]
pub fn install(provider: SdkTracerProvider) -> Traces {
    let _ = TRACER.set(provider.tracer("reconcile-host"));
    Traces { provider }
}

/// A short span that marks something a later reconcile links to (a watch event, a module swap,
/// a handover); its context, or `None` when tracing is off.
#[must_use]
pub fn mark(
    name: impl FnOnce() -> String,
    attributes: impl FnOnce() -> Vec<KeyValue>,
) -> Option<SpanContext> {
    let tracer = tracer()?;
    let span = tracer
        .span_builder(name())
        .with_kind(opentelemetry::trace::SpanKind::Internal)
        .with_attributes(attributes())
        .start_with_context(tracer, &Context::new());
    let context = opentelemetry::trace::Span::span_context(&span).clone();
    drop(span);
    Some(context)
}

/// The W3C `traceparent` header value naming `context`'s span.
#[must_use]
pub fn traceparent(context: &Context) -> Option<String> {
    let span = context.span();
    let span = span.span_context();
    span.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span.trace_id(),
            span.span_id(),
            span.trace_flags().to_u8()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_is_on_only_with_an_endpoint_and_not_disabled() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        assert!(!wanted(&env(&[])));
        assert!(wanted(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://c:4317"
        )])));
        assert!(wanted(&env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://c:4318/v1/traces"
        )])));
        assert!(!wanted(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!wanted(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_SDK_DISABLED", "true"),
        ])));
        assert!(!wanted(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])));
    }

    #[test]
    fn a_traceparent_names_the_trace_the_span_and_the_sampled_flag() {
        use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let context = Context::new().with_remote_span_context(span);
        assert_eq!(
            traceparent(&context).as_deref(),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        assert_eq!(traceparent(&Context::new()), None);
    }
}
