//! The manifest as written (YAML through serde) and its validation into a [`Manifest`].

use std::fmt;
use std::path::Path;
use std::time::Duration;

use label_selector::LabelSelector;
use serde::Deserialize;

use super::grant::{Grant, VERBS, Verb};
use super::model::{ApiRateLimit, InstanceReuse, Limits, Manifest, RateLimiterSettings};
use super::values::{
    GI, MI, Problem, describe, duration_in, each_once, integer_in, kind_ref, label_problem,
    memory_in, problem,
};

/// The manifest as written; [`RawManifest::validate`] turns it into a [`Manifest`]. Scalars
/// such as durations and sizes stay text (serde_yaml_ng reads `1000` into a `String` too) so
/// that validation errors quote them as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(
    expecting = "a plugin manifest: a mapping with `name`, `module`, `for` and optional fields"
)]
pub(super) struct RawManifest {
    name: Option<String>,
    module: Option<String>,
    #[serde(rename = "for")]
    for_kind: Option<RawKind>,
    owns: Option<Vec<RawKind>>,
    cache: Option<Vec<RawKind>>,
    namespace: Option<String>,
    label_selector: Option<String>,
    generation_changed: Option<bool>,
    resync: Option<String>,
    concurrency: Option<i64>,
    rate_limiter: Option<RawRateLimiter>,
    limits: Option<RawLimits>,
    api_rate_limit: Option<RawApiRateLimit>,
    instance_reuse: Option<RawInstanceReuse>,
    env: Option<Env>,
    grants: Option<Vec<RawGrant>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a kind: a mapping like `{apiVersion: apps/v1, kind: Deployment}`")]
struct RawKind {
    api_version: String,
    kind: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `baseDelay`, `maxDelay`, `qps` and `burst`")]
struct RawRateLimiter {
    base_delay: Option<String>,
    max_delay: Option<String>,
    qps: Option<f64>,
    burst: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `deadline`, `memory`, `minRequeueAfter` and `logLinesPerSecond`")]
struct RawLimits {
    deadline: Option<String>,
    memory: Option<String>,
    min_requeue_after: Option<String>,
    log_lines_per_second: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `qps` and `burst`")]
struct RawApiRateLimit {
    qps: Option<f64>,
    burst: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `maxCalls` and `maxMemory`")]
struct RawInstanceReuse {
    max_calls: Option<i64>,
    max_memory: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(
    expecting = "a grant: a mapping of `apiVersion`, `kind`, `verbs` and optional `namespaces` and `subresources`"
)]
struct RawGrant {
    api_version: String,
    kind: String,
    verbs: Option<Vec<String>>,
    namespaces: Option<Vec<String>>,
    subresources: Option<Vec<String>>,
}

/// `env:` in file order; unlike a map type, refuses a name written twice.
struct Env(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Env {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Env;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of variable names to values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Env, A::Error> {
                let mut vars: Vec<(String, String)> = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    if vars.iter().any(|(n, _)| *n == name) {
                        let message = format!("variable `{name}` is set twice; keep one");
                        return Err(serde::de::Error::custom(message));
                    }
                    vars.push((name, value));
                }
                Ok(Env(vars))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl RawManifest {
    pub(super) fn validate(self, base_dir: &Path) -> Result<Manifest, Problem> {
        let name = self.name.unwrap_or_default();
        if name.is_empty() {
            return Err(problem(
                "name",
                "missing; add the plugin's name, e.g. `name: website`",
            ));
        }
        if let Some(problem_text) = label_problem("name", &name) {
            return Err(problem("name", problem_text));
        }
        let module = match self.module.as_deref() {
            None | Some("") => {
                return Err(problem(
                    "module",
                    "missing; add the component's path, e.g. `module: website.wasm` (relative \
                     to the manifest's directory)",
                ));
            }
            Some(module) => std::path::absolute(base_dir.join(module))
                .map_err(|e| problem("module", format!("cannot make `{module}` absolute: {e}")))?,
        };
        let Some(for_raw) = &self.for_kind else {
            return Err(problem(
                "for",
                "missing; add the kind to reconcile, e.g. `for: {apiVersion: example.com/v1, \
                 kind: Website}`",
            ));
        };
        let for_kind = kind_ref("for", &for_raw.api_version, &for_raw.kind)?;
        let mut seen = vec![("for".to_owned(), for_kind.clone())];
        let mut kinds = |list: &str, raw: Option<Vec<RawKind>>| {
            let mut kinds = Vec::new();
            for (i, raw) in raw.into_iter().flatten().enumerate() {
                let field = format!("{list}[{i}]");
                let kind = kind_ref(&field, &raw.api_version, &raw.kind)?;
                // `cache` may repeat the `for` kind: the guest then reads all of its objects,
                // not only those matching `labelSelector`.
                let repeats = |earlier: &str| !(list == "cache" && earlier == "for");
                if let Some((earlier, _)) =
                    seen.iter().find(|(e, k)| *k == kind && repeats(e.as_str()))
                {
                    return Err(problem(
                        field,
                        format!(
                            "{} is already listed as `{earlier}`; list each kind once",
                            describe(&kind)
                        ),
                    ));
                }
                seen.push((field, kind.clone()));
                kinds.push(kind);
            }
            Ok(kinds)
        };
        let owns = kinds("owns", self.owns)?;
        let cache = kinds("cache", self.cache)?;
        if let Some(namespace) = &self.namespace
            && let Some(problem_text) = label_problem("namespace name", namespace)
        {
            let fix = "; or remove `namespace` to watch every namespace";
            return Err(problem("namespace", problem_text + fix));
        }
        let label_selector = match &self.label_selector {
            Some(text) => Some(
                LabelSelector::parse(text).map_err(|e| problem("labelSelector", e.to_string()))?,
            ),
            None => None,
        };
        let resync = match self.resync.as_deref() {
            Some(text) => Some(duration_in(
                "resync",
                Some(text),
                Duration::ZERO,
                (Duration::from_secs(1), Duration::MAX),
                "resync at most once a second (e.g. `10m`), or remove `resync` to turn it off",
            )?),
            None => None,
        };
        let concurrency = integer_in(
            "concurrency",
            self.concurrency,
            1,
            64,
            "allow 1 to 64 concurrent reconciles",
        )?;
        let rate_limiter = validate_rate_limiter(self.rate_limiter.unwrap_or_default())?;
        let (raw, default) = (self.limits.unwrap_or_default(), Limits::default());
        let limits = Limits {
            deadline: duration_in(
                "limits.deadline",
                raw.deadline.as_deref(),
                default.deadline,
                (Duration::from_millis(1), Duration::from_secs(600)),
                "a deadline is between 1ms and 10m",
            )?,
            memory: memory_in(
                "limits.memory",
                raw.memory.as_deref(),
                default.memory,
                (MI, 4 * GI),
                "a memory limit is between 1Mi and 4Gi",
            )?,
            min_requeue_after: duration_in(
                "limits.minRequeueAfter",
                raw.min_requeue_after.as_deref(),
                default.min_requeue_after,
                (Duration::from_millis(10), Duration::from_secs(3600)),
                "the shortest requeue-after is between 10ms and 1h (default 100ms)",
            )?,
            log_lines_per_second: integer_in(
                "limits.logLinesPerSecond",
                raw.log_lines_per_second,
                default.log_lines_per_second,
                100_000,
                "allow 1 to 100000 guest log lines a second (default 100)",
            )?,
        };
        let api_rate_limit = match self.api_rate_limit {
            Some(raw) => Some(validate_api_rate_limit(raw)?),
            None => None,
        };
        let instance_reuse = match self.instance_reuse {
            Some(raw) => Some(InstanceReuse {
                max_calls: integer_in(
                    "instanceReuse.maxCalls",
                    raw.max_calls,
                    1000,
                    u32::MAX.into(),
                    "replace the instance after 1 or more calls (default 1000)",
                )?,
                max_memory: memory_in(
                    "instanceReuse.maxMemory",
                    raw.max_memory.as_deref(),
                    limits.memory,
                    (1, limits.memory),
                    &format!(
                        "it must be more than 0 and at most limits.memory ({} bytes); lower it \
                         or raise limits.memory",
                        limits.memory
                    ),
                )?,
            }),
            None => None,
        };
        let mut env = self.env.map(|Env(vars)| vars).unwrap_or_default();
        env.sort();
        for (name, _) in &env {
            let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok {
                return Err(problem(
                    format!("env.{name}"),
                    format!(
                        "`{name}` is not an environment variable name; use letters, digits and \
                         `_`, not starting with a digit, e.g. `LOG_FORMAT`"
                    ),
                ));
            }
        }
        let grants = (self.grants.iter().flatten().enumerate())
            .map(|(i, raw)| validate_grant(&format!("grants[{i}]"), raw))
            .collect::<Result<_, _>>()?;
        Ok(Manifest {
            name,
            module,
            for_kind,
            owns,
            cache,
            namespace: self.namespace,
            label_selector,
            generation_changed: self.generation_changed.unwrap_or(false),
            resync,
            concurrency,
            rate_limiter,
            limits,
            api_rate_limit,
            instance_reuse,
            env,
            grants,
        })
    }
}

fn validate_rate_limiter(raw: RawRateLimiter) -> Result<RateLimiterSettings, Problem> {
    let default = RateLimiterSettings::default();
    let base_delay = duration_in(
        "rateLimiter.baseDelay",
        raw.base_delay.as_deref(),
        default.base_delay,
        (Duration::from_nanos(1), Duration::MAX),
        "the first retry delay must be more than 0 (default 5ms)",
    )?;
    let max_delay = duration_in(
        "rateLimiter.maxDelay",
        raw.max_delay.as_deref(),
        default.max_delay,
        (base_delay, Duration::MAX),
        &format!("maxDelay must be at least baseDelay ({base_delay:?})"),
    )?;
    let qps = raw.qps.unwrap_or(default.qps);
    if !(qps.is_finite() && qps > 0.0) {
        return Err(problem(
            "rateLimiter.qps",
            format!("`{qps}` is not a positive rate; write reconciles per second, e.g. 10"),
        ));
    }
    let burst = integer_in(
        "rateLimiter.burst",
        raw.burst,
        default.burst,
        u32::MAX.into(),
        "burst must be at least 1 (default 100)",
    )?;
    Ok(RateLimiterSettings {
        base_delay,
        max_delay,
        qps,
        burst,
    })
}

fn validate_api_rate_limit(raw: RawApiRateLimit) -> Result<ApiRateLimit, Problem> {
    let Some(qps) = raw.qps else {
        return Err(problem(
            "apiRateLimit.qps",
            "missing; write the plugin's API requests per second, e.g. `qps: 5`",
        ));
    };
    if !(qps.is_finite() && qps > 0.0) {
        return Err(problem(
            "apiRateLimit.qps",
            format!("`{qps}` is not a positive rate; write requests per second, e.g. 5"),
        ));
    }
    let burst = integer_in(
        "apiRateLimit.burst",
        raw.burst,
        (qps.ceil() as u32).max(1),
        u32::MAX.into(),
        "burst must be at least 1 (default: qps, rounded up)",
    )?;
    Ok(ApiRateLimit { qps, burst })
}

fn validate_grant(field: &str, raw: &RawGrant) -> Result<Grant, Problem> {
    let kind = kind_ref(field, &raw.api_version, &raw.kind)?;
    let verbs_field = format!("{field}.verbs");
    let written = raw.verbs.as_deref().unwrap_or_default();
    if written.is_empty() {
        let message = format!(
            "missing; list what the plugin may do with {}: some of {VERBS}",
            describe(&kind)
        );
        return Err(problem(verbs_field, message));
    }
    each_once(&verbs_field, written, |verb| {
        let hint = if matches!(verb, "list" | "watch") {
            " (lists and watches go through the `cache` import: add the kind under `cache:`)"
        } else {
            ""
        };
        let known = Verb::ALL.iter().any(|v| v.as_str() == verb);
        (!known).then(|| format!("`{verb}` is not a verb a grant can give; use {VERBS}{hint}"))
    })?;
    let verbs = (written.iter())
        .filter_map(|w| Verb::ALL.into_iter().find(|v| v.as_str() == w))
        .collect();
    let namespaces_field = format!("{field}.namespaces");
    let namespaces = match raw.namespaces.as_deref() {
        None => None,
        Some([all]) if all == "*" => None,
        Some([]) => {
            return Err(problem(
                namespaces_field,
                "is empty, so the grant allows nothing; list namespaces, or remove `namespaces` \
                 (or write [\"*\"]) to allow every namespace",
            ));
        }
        Some(list) => {
            each_once(&namespaces_field, list, |namespace| match namespace {
                "*" => Some(
                    "`*` already means every namespace; write [\"*\"] alone or list names"
                        .to_owned(),
                ),
                _ => label_problem("namespace name", namespace)
                    .map(|p| p + ", or `*` for every namespace"),
            })?;
            Some(list.to_vec())
        }
    };
    let subresources = raw.subresources.clone().unwrap_or_default();
    each_once(&format!("{field}.subresources"), &subresources, |name| {
        label_problem("subresource name", name).map(|p| p + ", e.g. `status` or `scale`")
    })?;
    Ok(Grant {
        kind,
        verbs,
        namespaces,
        subresources,
    })
}
