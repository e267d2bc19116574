//! Each plugin's latest log lines, kept in memory for `GET /debug/logs/{plugin}` and
//! `kubectl reconcile logs`: the lines of the host's log that are about a plugin — a guest's
//! output and `log` calls (field `plugin`), and the host's lines inside one of the plugin's
//! reconciles (the `reconcile` span names its controller, which is the plugin) — at the levels
//! the host logs (`RUST_LOG`).
//!
//! [`PluginLogLayer`] is a `tracing` layer that copies those lines into the process's
//! [`book`]. Bounded: per plugin the last [`PER_PLUGIN`] lines and at most [`PER_PLUGIN_BYTES`]
//! bytes of text; [`MAX_PLUGINS`] plugins, the one written to longest ago forgotten first.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Lines kept per plugin.
pub const PER_PLUGIN: usize = 1000;
/// Bytes of text (message and fields) kept per plugin.
pub const PER_PLUGIN_BYTES: usize = 1 << 20;
/// Plugins whose lines are kept.
pub const MAX_PLUGINS: usize = 256;
/// Lines one answer holds at most.
pub const MAX_ANSWER: usize = PER_PLUGIN;

/// One line.
#[derive(Clone, Debug)]
struct Line {
    seq: u64,
    at: SystemTime,
    level: tracing::Level,
    target: &'static str,
    key: Option<Arc<str>>,
    message: String,
    fields: Vec<(&'static str, String)>,
}

impl Line {
    fn size(&self) -> usize {
        self.message.len()
            + self
                .fields
                .iter()
                .map(|(name, value)| name.len() + value.len())
                .sum::<usize>()
    }

    fn json(&self) -> Value {
        let fields: serde_json::Map<String, Value> = self
            .fields
            .iter()
            .map(|(name, value)| ((*name).to_owned(), Value::String(value.clone())))
            .collect();
        json!({
            "seq": self.seq,
            "at": k8s_openapi::jiff::Timestamp::try_from(self.at)
                .and_then(|at| at.round(k8s_openapi::jiff::Unit::Millisecond))
                .map(|at| at.to_string())
                .unwrap_or_default(),
            "level": self.level.as_str(),
            "target": self.target,
            "key": self.key.as_deref(),
            "message": self.message,
            "fields": fields,
        })
    }
}

#[derive(Debug, Default)]
struct Plugin {
    lines: VecDeque<Line>,
    bytes: usize,
    /// The `seq` of its newest line.
    written: u64,
}

#[derive(Debug, Default)]
struct Pages {
    plugins: HashMap<Arc<str>, Plugin>,
    next: u64,
}

/// The plugins' latest log lines.
#[derive(Debug, Default)]
pub struct LogBook {
    pages: Mutex<Pages>,
}

/// This process's log book, filled by [`PluginLogLayer`].
#[must_use]
pub fn book() -> &'static LogBook {
    static BOOK: LazyLock<LogBook> = LazyLock::new(LogBook::default);
    &BOOK
}

impl LogBook {
    fn write(&self, plugin: &str, mut line: Line) {
        let mut pages = self.pages.lock();
        pages.next += 1;
        line.seq = pages.next;
        if !pages.plugins.contains_key(plugin) && pages.plugins.len() >= MAX_PLUGINS {
            let oldest = pages
                .plugins
                .iter()
                .min_by_key(|(_, page)| page.written)
                .map(|(name, _)| Arc::clone(name));
            if let Some(oldest) = oldest {
                pages.plugins.remove(&oldest);
            }
        }
        let page = pages.plugins.entry(Arc::from(plugin)).or_default();
        page.written = line.seq;
        page.bytes += line.size();
        page.lines.push_back(line);
        while page.lines.len() > PER_PLUGIN
            || (page.bytes > PER_PLUGIN_BYTES && page.lines.len() > 1)
        {
            if let Some(gone) = page.lines.pop_front() {
                page.bytes -= gone.size();
            }
        }
    }

    /// The plugins with lines, each with how many and the `seq` of the newest.
    #[must_use]
    pub fn summary(&self) -> Value {
        let pages = self.pages.lock();
        let mut plugins: Vec<Value> = pages
            .plugins
            .iter()
            .map(|(name, page)| json!({"plugin": &**name, "lines": page.lines.len(), "newest": page.written}))
            .collect();
        plugins.sort_by(|a, b| a["plugin"].as_str().cmp(&b["plugin"].as_str()));
        Value::Array(plugins)
    }

    /// Plugin `plugin`'s lines after `after` (a `seq`; 0 for all kept), oldest first, the last
    /// `tail` of them when given; `None` if it has none.
    #[must_use]
    pub fn lines(&self, plugin: &str, after: u64, tail: Option<usize>) -> Option<Vec<Value>> {
        let pages = self.pages.lock();
        let page = pages.plugins.get(plugin)?;
        let newer: Vec<&Line> = page.lines.iter().filter(|line| line.seq > after).collect();
        let keep = tail.unwrap_or(MAX_ANSWER).min(MAX_ANSWER);
        let start = newer.len().saturating_sub(keep);
        Some(newer[start..].iter().map(|line| line.json()).collect())
    }
}

/// The plugin and key a `reconcile` span is about, kept in the span's extensions.
#[derive(Clone, Debug)]
struct Reconciling {
    plugin: Arc<str>,
    key: Option<Arc<str>>,
}

/// The `tracing` layer that keeps plugins' lines in [`book`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PluginLogLayer;

impl<S> Layer<S> for PluginLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "reconcile" {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let Some(plugin) = fields.plugin.or(fields.controller) else {
            return;
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Reconciling {
                plugin: plugin.into(),
                key: fields.key.map(Arc::from),
            });
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !super::logs::keeps(event.metadata()) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let reconciling = ctx.event_scope(event).and_then(|scope| {
            scope
                .into_iter()
                .find_map(|span| span.extensions().get::<Reconciling>().cloned())
        });
        let (plugin, key) = match (fields.plugin.take(), reconciling) {
            (Some(plugin), reconciling) => (
                Arc::from(plugin),
                fields
                    .key
                    .take()
                    .map(Arc::from)
                    .or_else(|| reconciling.and_then(|r| r.key)),
            ),
            (None, Some(reconciling)) => (
                reconciling.plugin,
                fields.key.take().map(Arc::from).or(reconciling.key),
            ),
            (None, None) => return,
        };
        if let Some(controller) = fields.controller.take() {
            fields.rest.push(("controller", controller));
        }
        let meta = event.metadata();
        book().write(
            &plugin,
            Line {
                seq: 0,
                at: SystemTime::now(),
                level: *meta.level(),
                target: meta.target(),
                key,
                message: fields.message.unwrap_or_default(),
                fields: fields.rest,
            },
        );
    }
}

/// An event's or span's fields: the plugin, controller and key it names, its message and the
/// rest, each as text.
#[derive(Debug, Default)]
struct Fields {
    plugin: Option<String>,
    controller: Option<String>,
    key: Option<String>,
    message: Option<String>,
    rest: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.keep(field, value.to_owned());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(text, ": {cause}");
            source = cause.source();
        }
        self.keep(field, text);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.keep(field, format!("{value:?}"));
    }
}

impl Fields {
    fn keep(&mut self, field: &Field, value: String) {
        match field.name() {
            "plugin" => self.plugin = Some(value),
            "controller" => self.controller = Some(value),
            "key" => self.key = Some(value),
            "message" => self.message = Some(value),
            name => self.rest.push((name, value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt as _;

    fn with_layer(f: impl FnOnce()) {
        let subscriber = tracing_subscriber::registry().with(PluginLogLayer);
        tracing::subscriber::with_default(subscriber, f);
    }

    fn texts(plugin: &str) -> Vec<(String, Option<String>)> {
        book()
            .lines(plugin, 0, None)
            .unwrap_or_default()
            .iter()
            .map(|line| {
                (
                    line["message"].as_str().unwrap().to_owned(),
                    line["key"].as_str().map(ToOwned::to_owned),
                )
            })
            .collect()
    }

    #[test]
    fn lines_naming_a_plugin_or_inside_its_reconcile_are_kept_others_not() {
        with_layer(|| {
            tracing::info!(plugin = "book-a", text = "hello", "guest log");
            let span = tracing::info_span!("reconcile", controller = "book-a", key = "ns/one");
            span.in_scope(|| {
                tracing::warn!(error = "boom", "reconcile failed; retrying with backoff");
            });
            tracing::info!("a line about no plugin");
            let other = tracing::info_span!("watch", controller = "book-a");
            other.in_scope(|| tracing::info!("inside another span"));
        });
        assert_eq!(
            texts("book-a"),
            vec![
                ("guest log".to_owned(), None),
                (
                    "reconcile failed; retrying with backoff".to_owned(),
                    Some("ns/one".to_owned())
                ),
            ]
        );
        let lines = book().lines("book-a", 0, None).unwrap();
        assert_eq!(lines[0]["fields"]["text"], "hello");
        assert_eq!(lines[1]["fields"]["error"], "boom");
        assert_eq!(lines[1]["level"], "WARN");
        let first = lines[0]["seq"].as_u64().unwrap();
        assert_eq!(book().lines("book-a", first, None).unwrap().len(), 1);
        assert_eq!(
            book().lines("book-a", 0, Some(1)).unwrap()[0]["seq"],
            lines[1]["seq"]
        );
        assert!(book().lines("book-none", 0, None).is_none());
    }

    #[test]
    fn a_plugin_keeps_its_last_lines_within_its_bounds() {
        let book = LogBook::default();
        let line = |text: &str| Line {
            seq: 0,
            at: SystemTime::now(),
            level: tracing::Level::INFO,
            target: "t",
            key: None,
            message: text.to_owned(),
            fields: Vec::new(),
        };
        for n in 0..PER_PLUGIN + 10 {
            book.write("p", line(&n.to_string()));
        }
        let lines = book.lines("p", 0, None).unwrap();
        assert_eq!(lines.len(), PER_PLUGIN);
        assert_eq!(lines[0]["message"], "10");
        let big = "x".repeat(PER_PLUGIN_BYTES / 4);
        for _ in 0..5 {
            book.write("p", line(&big));
        }
        let lines = book.lines("p", 0, None).unwrap();
        assert_eq!(
            lines.len(),
            4,
            "the bytes bound: four quarter-megabytes and no more"
        );
        for n in 0..MAX_PLUGINS {
            book.write(&format!("other-{n}"), line("x"));
        }
        assert!(
            book.lines("p", 0, None).is_none(),
            "the plugin written longest ago forgotten"
        );
        assert!(book.lines("other-0", 0, None).is_some());
    }
}
