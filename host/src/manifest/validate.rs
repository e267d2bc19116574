//! A manifest as written checked and turned into a [`Manifest`]: every field's value in range,
//! the module sources exclusive, grants and limits complete; each problem names the field and
//! the fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use label_selector::LabelSelector;

use super::grant::{Grant, VERBS, Verb};
use super::model::{
    ApiRateLimit, Canary, InstanceReuse, Limits, Manifest, RateLimiterSettings, Shadow,
};
use super::raw::{
    Env, RawApiRateLimit, RawCanary, RawGrant, RawKind, RawLimits, RawManifest, RawRateLimiter,
    RawShadow,
};
use super::values::{
    GI, MI, Problem, describe, duration_in, each_once, integer_in, kind_ref, label_problem,
    memory_in, problem,
};

impl RawManifest {
    /// The manifest this raw one describes, its relative paths taken from `base_dir`.
    pub(super) fn validate(self, base_dir: &Path) -> Result<Manifest, Problem> {
        let name = self.name.unwrap_or_default();
        if name.is_empty() {
            return Err(problem(
                "name",
                "missing; add the plugin's name, e.g. `name: website`",
            ));
        }
        // `<namespace>.<name>`: the plugin of a NamespacedReconcilerPlugin, which watches only
        // its namespace.
        let plain = match name.split_once('.') {
            Some((namespace, plain)) if self.namespace.as_deref() == Some(namespace) => plain,
            _ => name.as_str(),
        };
        if let Some(problem_text) = label_problem("name", plain) {
            return Err(problem("name", problem_text));
        }
        if let Some(field) = [
            ("oci", self.oci.is_some()),
            ("configMap", self.config_map.is_some()),
        ]
        .into_iter()
        .find_map(|(field, set)| set.then_some(field))
        {
            return Err(problem(
                field,
                "is a module source of ReconcilerPlugin objects (`kubectl apply`); a manifest file \
                 names its component with `module: <path>`",
            ));
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
        let service_account = super::identity::service_account(
            self.service_account_name,
            self.service_account_namespace,
            self.namespace.as_deref(),
        )?;
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
        let limits = validate_limits("limits", self.limits.unwrap_or_default(), Limits::default())?;
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
        let env = validate_env("env", self.env)?;
        let shadow = match self.shadow {
            Some(raw) => Some(validate_shadow(raw, base_dir, limits, &env)?),
            None => None,
        };
        let canary = match self.canary {
            Some(raw) => Some(validate_canary(raw, base_dir)?),
            None => None,
        };
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
            service_account,
            label_selector,
            generation_changed: self.generation_changed.unwrap_or(false),
            placement: self.placement.unwrap_or_default(),
            resync,
            concurrency,
            rate_limiter,
            limits,
            api_rate_limit,
            instance_reuse,
            env,
            grants,
            shadow,
            canary,
        })
    }
}

fn validate_limits(field: &str, raw: RawLimits, default: Limits) -> Result<Limits, Problem> {
    Ok(Limits {
        deadline: duration_in(
            &format!("{field}.deadline"),
            raw.deadline.as_deref(),
            default.deadline,
            (Duration::from_millis(1), Duration::from_secs(600)),
            "a deadline is between 1ms and 10m",
        )?,
        memory: memory_in(
            &format!("{field}.memory"),
            raw.memory.as_deref(),
            default.memory,
            (MI, 4 * GI),
            "a memory limit is between 1Mi and 4Gi",
        )?,
        min_requeue_after: duration_in(
            &format!("{field}.minRequeueAfter"),
            raw.min_requeue_after.as_deref(),
            default.min_requeue_after,
            (Duration::from_millis(10), Duration::from_secs(3600)),
            "the shortest requeue-after is between 10ms and 1h (default 100ms)",
        )?,
        log_lines_per_second: integer_in(
            &format!("{field}.logLinesPerSecond"),
            raw.log_lines_per_second,
            default.log_lines_per_second,
            100_000,
            "allow 1 to 100000 guest log lines a second (default 100)",
        )?,
    })
}

fn validate_env(field: &str, raw: Option<Env>) -> Result<Vec<(String, String)>, Problem> {
    let mut env = raw.map(|Env(vars)| vars).unwrap_or_default();
    env.sort();
    for (name, _) in &env {
        let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(problem(
                format!("{field}.{name}"),
                format!(
                    "`{name}` is not an environment variable name; use letters, digits and \
                     `_`, not starting with a digit, e.g. `LOG_FORMAT`"
                ),
            ));
        }
    }
    Ok(env)
}

/// A module path of `field`, absolute (resolved against the manifest's directory).
fn module_path(field: &str, module: Option<&str>, base_dir: &Path) -> Result<PathBuf, Problem> {
    match module {
        None | Some("") => Err(problem(
            field,
            "missing; add the component's path, e.g. `module: website-v2.wasm` (relative to \
             the manifest's directory)",
        )),
        Some(module) => std::path::absolute(base_dir.join(module))
            .map_err(|e| problem(field, format!("cannot make `{module}` absolute: {e}"))),
    }
}

/// A file's shadow or canary names its component with `module`, never `oci`.
fn file_source(field: &str, oci: Option<&String>) -> Result<(), Problem> {
    match oci {
        Some(_) => Err(problem(
            format!("{field}.oci"),
            format!(
                "is a module source of ReconcilerPlugin objects (`kubectl apply`); a manifest \
                 file names the {field}'s component with `{field}.module: <path>`"
            ),
        )),
        None => Ok(()),
    }
}

fn validate_shadow(
    raw: RawShadow,
    base_dir: &Path,
    limits: Limits,
    env: &[(String, String)],
) -> Result<Shadow, Problem> {
    file_source("shadow", raw.oci.as_ref())?;
    let module = module_path("shadow.module", raw.module.as_deref(), base_dir)?;
    let sample = raw.sample.unwrap_or(1.0);
    if !(sample > 0.0 && sample <= 1.0) {
        return Err(problem(
            "shadow.sample",
            format!(
                "{sample} is not a fraction of reconciles; give a number above 0 and at most 1 \
                 (default 1: every reconcile)"
            ),
        ));
    }
    let limits = match raw.limits {
        Some(raw) => validate_limits("shadow.limits", raw, limits)?,
        None => limits,
    };
    let env = match raw.env {
        Some(raw) => validate_env("shadow.env", Some(raw))?,
        None => env.to_vec(),
    };
    Ok(Shadow {
        module,
        sample,
        limits,
        env,
    })
}

fn validate_canary(raw: RawCanary, base_dir: &Path) -> Result<Canary, Problem> {
    file_source("canary", raw.oci.as_ref())?;
    let module = module_path("canary.module", raw.module.as_deref(), base_dir)?;
    let selector = match raw.selector.as_deref() {
        None | Some("") => {
            return Err(problem(
                "canary.selector",
                "missing; add the label selector of the objects the canary reconciles, e.g. \
                 `selector: \"canary=true\"`",
            ));
        }
        Some(text) => {
            LabelSelector::parse(text).map_err(|e| problem("canary.selector", e.to_string()))?
        }
    };
    Ok(Canary { selector, module })
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
    if let Some(resource) = &raw.resource {
        let problem_text = label_problem("resource name", resource)
            .map(|p| p + ", the kind's plural as the API server serves it, e.g. `gateways`");
        if let Some(message) = problem_text {
            return Err(problem(format!("{field}.resource"), message));
        }
    }
    let grant = Grant {
        kind,
        verbs,
        namespaces,
        subresources,
        resource: raw.resource.clone(),
    };
    match super::reserved::refusal(&grant) {
        Some(message) => Err(problem(field, message)),
        None => Ok(grant),
    }
}
