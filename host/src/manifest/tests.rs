//! Tests of manifest parsing, validation and the grant checks.

use std::time::Duration;

use super::*;
use crate::runtime::KindRef;

pub(super) const FULL: &str = r#"
name: website
module: website.wasm
for:
  apiVersion: example.com/v1
  kind: Website
owns:
  - apiVersion: apps/v1
    kind: Deployment
cache:
  - apiVersion: v1
    kind: Namespace
namespace: default
serviceAccountName: website
serviceAccountNamespace: sites
labelSelector: "app=web"
generationChanged: true
placement: whole
resync: 10m
concurrency: 2
rateLimiter:
  baseDelay: 5ms
  maxDelay: 1000s
  qps: 10
  burst: 100
limits:
  deadline: 10s
  memory: 64Mi
  minRequeueAfter: 100ms
apiRateLimit:
  qps: 20
  burst: 40
instanceReuse:
  maxCalls: 1000
  maxMemory: 32Mi
env:
  LOG_FORMAT: json
grants:
  - apiVersion: apps/v1
    kind: Deployment
    verbs: [get, create, update, patch, delete]
    namespaces: [default]
    subresources: [status]
"#;

const MINIMAL: &str = "name: web\nmodule: web.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n";

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(text, Path::new("/plugins/web"))
}

fn deployment() -> KindRef {
    KindRef::new("apps/v1", "Deployment")
}

#[test]
fn a_minimal_manifest_gets_every_default() {
    let manifest = parse(MINIMAL).unwrap();
    assert_eq!(manifest.name, "web");
    assert_eq!(manifest.module, Path::new("/plugins/web/web.wasm"));
    assert_eq!(manifest.for_kind, KindRef::new("v1", "ConfigMap"));
    assert!(manifest.owns.is_empty() && manifest.cache.is_empty());
    assert_eq!(manifest.namespace, None);
    assert_eq!(manifest.label_selector, None);
    assert!(!manifest.generation_changed);
    assert_eq!(manifest.placement, crate::shard::Placement::Keys);
    assert_eq!(manifest.resync, None);
    assert_eq!(manifest.concurrency, 1);
    assert_eq!(manifest.rate_limiter, RateLimiterSettings::default());
    assert_eq!(manifest.rate_limiter.base_delay, Duration::from_millis(5));
    assert_eq!(manifest.rate_limiter.max_delay, Duration::from_secs(1000));
    assert_eq!(
        (manifest.rate_limiter.qps, manifest.rate_limiter.burst),
        (10.0, 100)
    );
    assert_eq!(manifest.limits, Limits::default());
    assert_eq!(manifest.limits.deadline, Duration::from_secs(10));
    assert_eq!(manifest.limits.memory, 64 << 20);
    assert_eq!(
        manifest.limits.min_requeue_after,
        Duration::from_millis(100)
    );
    assert_eq!(manifest.api_rate_limit, None);
    assert_eq!(manifest.instance_reuse, None);
    assert!(manifest.env.is_empty() && manifest.grants.is_empty());
}

#[test]
fn the_full_example_parses_to_its_values() {
    let manifest = parse(FULL).unwrap();
    assert_eq!(manifest.name, "website");
    assert_eq!(manifest.module, Path::new("/plugins/web/website.wasm"));
    assert_eq!(manifest.for_kind, KindRef::new("example.com/v1", "Website"));
    assert_eq!(manifest.owns, [deployment()]);
    assert_eq!(manifest.cache, [KindRef::new("v1", "Namespace")]);
    assert_eq!(manifest.namespace.as_deref(), Some("default"));
    assert_eq!(
        manifest
            .service_account
            .as_ref()
            .map(ServiceAccountRef::user)
            .as_deref(),
        Some("system:serviceaccount:sites:website")
    );
    assert_eq!(manifest.label_selector.unwrap().to_string(), "app=web");
    assert!(manifest.generation_changed);
    assert_eq!(manifest.placement, crate::shard::Placement::Whole);
    assert_eq!(manifest.resync, Some(Duration::from_secs(600)));
    assert_eq!(manifest.concurrency, 2);
    assert_eq!(manifest.rate_limiter, RateLimiterSettings::default());
    assert_eq!(manifest.limits, Limits::default());
    assert_eq!(
        manifest.api_rate_limit,
        Some(ApiRateLimit {
            qps: 20.0,
            burst: 40
        })
    );
    let reuse = manifest.instance_reuse.unwrap();
    assert_eq!((reuse.max_calls, reuse.max_memory), (1000, 32 << 20));
    assert_eq!(manifest.env, [("LOG_FORMAT".to_owned(), "json".to_owned())]);
    assert_eq!(
        manifest.grants,
        [Grant {
            kind: deployment(),
            verbs: Verb::ALL.to_vec(),
            namespaces: Some(vec!["default".to_owned()]),
            subresources: vec!["status".to_owned()],
            resource: None,
        }]
    );
}

#[test]
fn instance_reuse_defaults_its_memory_to_the_limit_and_env_is_sorted() {
    let manifest = parse(&format!(
        "{MINIMAL}limits: {{memory: 128Mi}}\ninstanceReuse: {{}}\nenv: {{B: '2', A: '1'}}\n"
    ))
    .unwrap();
    let reuse = manifest.instance_reuse.unwrap();
    assert_eq!((reuse.max_calls, reuse.max_memory), (1000, 128 << 20));
    assert_eq!(manifest.env[0].0, "A");
    assert_eq!(manifest.env[1].0, "B");
}

#[test]
fn the_module_is_resolved_against_the_manifest_directory() {
    let at = |module: &str, dir: &str| {
        Manifest::parse(&MINIMAL.replace("web.wasm", module), Path::new(dir))
            .unwrap()
            .module
    };
    assert_eq!(at("x.wasm", "/a/b"), Path::new("/a/b/x.wasm"));
    assert_eq!(at("lib/x.wasm", "/a"), Path::new("/a/lib/x.wasm"));
    assert_eq!(at("/abs/x.wasm", "/a"), Path::new("/abs/x.wasm"));
    let relative = at("x.wasm", "plugins");
    assert!(relative.is_absolute(), "{}", relative.display());
    assert!(relative.ends_with("plugins/x.wasm"));
}

#[test]
fn load_reads_the_file_and_names_it_in_errors_without_needing_the_module() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let path = dir.join("plugin.yaml");
    std::fs::write(&path, MINIMAL).unwrap();
    let manifest = Manifest::load(&path).unwrap();
    assert_eq!(manifest.module, dir.join("web.wasm"));
    std::fs::write(&path, format!("{MINIMAL}concurrency: 0\n")).unwrap();
    let error = Manifest::load(&path).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "plugin manifest {}: `concurrency`",
            path.display()
        )),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let error = Manifest::load(&path).unwrap_err();
    assert!(matches!(error, ManifestError::Read { .. }), "{error}");
}

#[test]
fn each_invalid_value_is_refused_naming_its_field_value_and_fix() {
    // One case a line: YAML added to (or replacing a line of) MINIMAL | field | message part.
    let cases = "\
            name: Web_Site | name | `Web_Site` is not a valid name; use lowercase letters
            name: '' | name | missing; add the plugin's name
            module: '' | module | missing; add the component's path
            for: {apiVersion: '', kind: X} | for.apiVersion | missing; write `version`
            for: {apiVersion: Apps/v1, kind: X} | for.apiVersion | `Apps/v1` is not an apiVersion
            for: {apiVersion: v1, kind: ''} | for.kind | missing; write the kind's name
            owns: [{apiVersion: v1, kind: ConfigMap}] | owns[0] | v1 ConfigMap is already listed as `for`
            owns: [{apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: Secret}] | owns[1] | already listed as `owns[0]`
            cache: [{apiVersion: v1, kind: 'Con fig'}] | cache[0].kind | `Con fig` is not a kind
            owns: [{apiVersion: v1, kind: Secret}]\\ncache: [{apiVersion: v1, kind: Secret}] | cache[0] | already listed as `owns[0]`
            namespace: Prod | namespace | `Prod` is not a valid namespace name
            labelSelector: 'app in (a,b' | labelSelector | label selector `app in (a,b`: expected `)` after `b`
            resync: 500ms | resync | `500ms` is out of range; resync at most once a second
            resync: soon | resync | `soon` is not a duration
            concurrency: 65 | concurrency | `65` is out of range; allow 1 to 64
            concurrency: 0 | concurrency | `0` is out of range
            rateLimiter: {baseDelay: 0s} | rateLimiter.baseDelay | `0s` is out of range
            rateLimiter: {baseDelay: 2s, maxDelay: 1s} | rateLimiter.maxDelay | at least baseDelay (2s)
            rateLimiter: {qps: 0} | rateLimiter.qps | `0` is not a positive rate
            rateLimiter: {qps: .nan} | rateLimiter.qps | `NaN` is not a positive rate
            rateLimiter: {burst: 0} | rateLimiter.burst | `0` is out of range; burst must be at least 1
            limits: {deadline: 11m} | limits.deadline | `11m` is out of range; a deadline is between 1ms and 10m
            limits: {deadline: 0s} | limits.deadline | `0s` is out of range
            limits: {memory: 64MB} | limits.memory | `64MB` is not a memory size; write it like 64Mi
            limits: {memory: 5Gi} | limits.memory | `5Gi` is out of range; a memory limit is between 1Mi and 4Gi
            limits: {memory: 1000} | limits.memory | `1000` is out of range
            limits: {minRequeueAfter: 0s} | limits.minRequeueAfter | `0s` is out of range; the shortest requeue-after is between 10ms and 1h
            limits: {minRequeueAfter: 2h} | limits.minRequeueAfter | `2h` is out of range
            limits: {logLinesPerSecond: 0} | limits.logLinesPerSecond | `0` is out of range; allow 1 to 100000 guest log lines a second
            apiRateLimit: {burst: 3} | apiRateLimit.qps | missing; write the plugin's API requests per second
            apiRateLimit: {qps: 0} | apiRateLimit.qps | `0` is not a positive rate
            apiRateLimit: {qps: 5, burst: 0} | apiRateLimit.burst | `0` is out of range; burst must be at least 1
            instanceReuse: {maxCalls: 0} | instanceReuse.maxCalls | `0` is out of range
            instanceReuse: {maxMemory: 128Mi} | instanceReuse.maxMemory | at most limits.memory (67108864 bytes)
            env: {LOG-FORMAT: json} | env.LOG-FORMAT | `LOG-FORMAT` is not an environment variable name
            env: {1X: json} | env.1X | not starting with a digit
            grants: [{apiVersion: v1, kind: Secret}] | grants[0].verbs | missing; list what the plugin may do with v1 Secret
            grants: [{apiVersion: v1, kind: Secret, verbs: []}] | grants[0].verbs | missing
            grants: [{apiVersion: v1, kind: Secret, verbs: [list]}] | grants[0].verbs | `list` is not a verb a grant can give; use get, create, update, patch or delete (lists and watches go through the `cache` import
            grants: [{apiVersion: v1, kind: Secret, verbs: [Get]}] | grants[0].verbs | `Get` is not a verb
            grants: [{apiVersion: v1, kind: Secret, verbs: [get, get]}] | grants[0].verbs | `get` is listed twice
            grants: [{apiVersion: v1, kind: A, verbs: [get]}, {kind: B}] | grants[1].apiVersion | missing
            grants: [{apiVersion: v1, kind: A, verbs: [get], namespaces: []}] | grants[0].namespaces | is empty, so the grant allows nothing
            grants: [{apiVersion: v1, kind: A, verbs: [get], namespaces: [a, '*']}] | grants[0].namespaces | `*` already means every namespace
            grants: [{apiVersion: v1, kind: A, verbs: [get], namespaces: [A]}] | grants[0].namespaces | `A` is not a valid namespace name
            grants: [{apiVersion: v1, kind: A, verbs: [get], subresources: [Status]}] | grants[0].subresources | `Status` is not a valid subresource name
            grants: [{apiVersion: v1, kind: A, verbs: [get], resource: As/x}] | grants[0].resource | `As/x` is not a valid resource name; use lowercase letters, digits and `-`, at most 63 characters, starting and ending with a letter or digit, the kind's plural
            shadow: {sample: 1} | shadow.module | missing; add the component's path
            shadow: {module: v2.wasm, sample: 0} | shadow.sample | 0 is not a fraction of reconciles; give a number above 0 and at most 1
            shadow: {module: v2.wasm, sample: 1.5} | shadow.sample | 1.5 is not a fraction
            shadow: {module: v2.wasm, limits: {deadline: 11m}} | shadow.limits.deadline | `11m` is out of range
            shadow: {module: v2.wasm, env: {A-B: x}} | shadow.env.A-B | `A-B` is not an environment variable name
            canary: {module: v2.wasm} | canary.selector | missing; add the label selector of the objects the canary reconciles
            canary: {selector: 'a in (b', module: v2.wasm} | canary.selector | label selector `a in (b`
            canary: {selector: canary=true} | canary.module | missing; add the component's path
            shadow: {oci: r.example.com/w@sha256:0} | shadow.oci | is a module source of ReconcilerPlugin objects
            canary: {selector: a=b, oci: r.example.com/w:v2} | canary.oci | is a module source of ReconcilerPlugin objects";
    for case in cases.lines() {
        let mut parts = case.trim().split(" | ");
        let (extra, field, fragment) = (
            parts.next().expect(case),
            parts.next().expect(case),
            parts.next().expect(case),
        );
        let extra = extra.replace("\\n", "\n");
        let key = extra.split(':').next().unwrap();
        let kept: Vec<&str> = MINIMAL
            .lines()
            .filter(|line| !line.starts_with(key))
            .collect();
        let text = format!("{}\n{extra}\n", kept.join("\n"));
        match parse(&text) {
            Err(ManifestError::Invalid {
                field: got,
                problem,
                ..
            }) => {
                assert_eq!(got, field, "{extra}: {problem}");
                assert!(problem.contains(fragment), "{extra}: {problem}");
            }
            other => panic!("{extra}: expected an invalid `{field}`, got {other:?}"),
        }
    }
}

#[test]
fn an_invalid_field_reads_as_path_field_value_and_fix() {
    let error = parse(&format!("{MINIMAL}limits: {{memory: 64MB}}\n")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "plugin manifest /plugins/web: `limits.memory`: `64MB` is not a memory size; write \
             it like 64Mi, 1Gi or 67108864"
    );
}

#[test]
fn missing_required_fields_are_named() {
    for (text, field) in [
        ("", "name"),
        ("name: web\n", "module"),
        ("name: web\nmodule: w.wasm\n", "for"),
    ] {
        let Err(ManifestError::Invalid { field: got, .. }) = parse(text) else {
            panic!("{text:?} should be invalid");
        };
        assert_eq!(got, field);
    }
}

#[test]
fn a_huge_bad_value_is_not_echoed_whole() {
    let huge = "x".repeat(4 << 20);
    for text in [
        format!("{MINIMAL}resync: {huge}\n"),
        format!("{MINIMAL}labelSelector: '{huge} in ('\n"),
        format!("{MINIMAL}concurrency: {huge}\n"),
    ] {
        let error = parse(&text).unwrap_err().to_string();
        assert!(
            error.len() < 1024,
            "{} bytes: {}",
            error.len(),
            &error[..200]
        );
        assert!(error.contains("bytes)"), "{error}");
    }
}

#[test]
fn unknown_fields_are_refused_listing_the_allowed_ones() {
    let error = parse(&format!("{MINIMAL}concurency: 2\n"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("unknown field `concurency` (did you mean `concurrency`?)"),
        "{error}"
    );
    assert!(
        error.contains("`concurrency`") && error.contains("`grants`"),
        "{error}"
    );
    assert!(error.contains("line 4"), "{error}");
    let error = parse(&format!("{MINIMAL}limits: {{memry: 1Gi}}\n"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "limits: unknown field `memry` (did you mean `memory`?), expected one of \
                 `deadline`, `memory`, `minRequeueAfter`, `logLinesPerSecond`"
        ),
        "{error}"
    );
    let error = parse(&format!(
        "{MINIMAL}grants: [{{apiVersion: v1, kind: X, verb: [get]}}]\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(error.contains("grants[0]: unknown field `verb`"), "{error}");
    assert!(error.contains("`verbs`"), "{error}");
}

#[test]
fn scalars_are_read_as_written_and_wrong_types_are_parse_errors() {
    let manifest = parse(&format!("{MINIMAL}env: {{PORT: 8080, VERSION: 1.10}}\n")).unwrap();
    let want = [("PORT", "8080"), ("VERSION", "1.10")].map(|(k, v)| (k.to_owned(), v.to_owned()));
    assert_eq!(manifest.env, want);
    let error = parse(&format!("{MINIMAL}env: {{A: [1]}}\n")).unwrap_err();
    assert!(matches!(error, ManifestError::Parse { .. }), "{error}");
    assert!(
        error.to_string().contains("env.A: invalid type: sequence"),
        "{error}"
    );
    let error = parse(&format!("{MINIMAL}env: {{A: x, A: y}}\n")).unwrap_err();
    assert!(
        error.to_string().contains("variable `A` is set twice"),
        "{error}"
    );
    let error = parse(&format!("{MINIMAL}owns: [apps/v1 Deployment]\n")).unwrap_err();
    assert!(
        error.to_string().contains(
            "owns[0]: invalid type: string \"apps/v1 Deployment\", \
                                        expected a kind: a mapping like"
        ),
        "{error}"
    );
    let error = parse(&format!("{MINIMAL}concurrency: two\n")).unwrap_err();
    assert!(
        error.to_string().contains("concurrency: invalid type"),
        "{error}"
    );
}

#[test]
fn memory_sizes_parse_like_kubernetes_quantities() {
    for (text, want) in [
        ("67108864", 64 << 20),
        ("64Mi", 64 << 20),
        ("1Gi", 1 << 30),
        ("4Ki", 4096),
        ("1.5Gi", 3 << 29),
        ("0.5Ki", 512),
        ("128M", 128_000_000),
        ("1k", 1000),
        ("2G", 2_000_000_000),
        ("1.0000001k", 1001),
    ] {
        assert_eq!(quantity(text), Ok(want), "{text}");
    }
    for bad in [
        "", "64MB", "64mi", "1K", "-1Mi", "Mi", "1.2.3Mi", " 1Mi", "1e3", ".",
    ] {
        assert!(quantity(bad).is_err(), "{bad} should be refused");
    }
    assert!(quantity("16Ei").unwrap_err().contains("too large"));
    assert_eq!(
        parse(&format!("{MINIMAL}limits: {{memory: 67108864}}\n"))
            .unwrap()
            .limits
            .memory,
        64 << 20
    );
}

#[test]
fn star_in_grant_namespaces_means_every_namespace() {
    let manifest = parse(&format!(
        "{MINIMAL}grants: [{{apiVersion: v1, kind: Secret, verbs: [get], namespaces: ['*']}}]\n"
    ))
    .unwrap();
    assert_eq!(manifest.grants[0].namespaces, None);
    let secret = KindRef::new("v1", "Secret");
    manifest
        .allows(&secret, Verb::Get, Some("anywhere"), None)
        .unwrap();
    manifest.allows(&secret, Verb::Get, None, None).unwrap();
}

#[test]
fn allows_needs_one_grant_covering_kind_verb_namespace_and_subresource() {
    let manifest = parse(FULL).unwrap();
    let deployment = deployment();
    manifest
        .allows(&deployment, Verb::Delete, Some("default"), None)
        .unwrap();
    manifest
        .allows(&deployment, Verb::Patch, Some("default"), Some("status"))
        .unwrap();
    let denied = |kind: &KindRef, verb, namespace, subresource| {
        manifest
            .allows(kind, verb, namespace, subresource)
            .unwrap_err()
    };
    let error = denied(
        &KindRef::new("v1", "Secret"),
        Verb::Get,
        Some("default"),
        None,
    );
    assert_eq!(error.missing, Missing::Kind);
    assert_eq!(
        error.to_string(),
        "plugin `website` has no grant to `get` v1 Secret in namespace `default`; add a \
             grant for it under `grants:` in its manifest"
    );
    let error = denied(&deployment, Verb::Delete, Some("prod"), None);
    assert_eq!(error.missing, Missing::Namespace);
    assert!(
        error.to_string().starts_with(
            "plugin `website` has no grant to `delete` apps/v1 Deployment in namespace `prod`; \
                 add `prod` to the `namespaces` of its grant for apps/v1 Deployment"
        ),
        "{error}"
    );
    let error = denied(&deployment, Verb::Get, None, None);
    assert_eq!(error.missing, Missing::Namespace);
    assert!(
        error
            .to_string()
            .contains("cluster-wide; remove `namespaces`"),
        "{error}"
    );
    let error = denied(&deployment, Verb::Patch, Some("default"), Some("scale"));
    assert_eq!(error.missing, Missing::Subresource);
    assert!(
        error.to_string().contains(
            "to `patch` the `scale` subresource of apps/v1 Deployment in namespace \
                 `default`; add `scale` to the `subresources`"
        ),
        "{error}"
    );
    let read_only = parse(&format!(
        "{MINIMAL}grants: [{{apiVersion: apps/v1, kind: Deployment, verbs: [get]}}]\n"
    ))
    .unwrap();
    let error = read_only
        .allows(&deployment, Verb::Patch, Some("x"), None)
        .unwrap_err();
    assert_eq!(error.missing, Missing::Verb);
    assert!(
        error.to_string().contains("add `patch` to the `verbs`"),
        "{error}"
    );
}

#[test]
fn any_of_several_grants_for_a_kind_may_allow_a_call() {
    let manifest = parse(&format!(
        "{MINIMAL}grants:\n  - {{apiVersion: v1, kind: Secret, verbs: [get]}}\n  - \
             {{apiVersion: v1, kind: Secret, verbs: [delete], namespaces: [tmp]}}\n"
    ))
    .unwrap();
    let secret = KindRef::new("v1", "Secret");
    manifest
        .allows(&secret, Verb::Get, Some("prod"), None)
        .unwrap();
    manifest
        .allows(&secret, Verb::Delete, Some("tmp"), None)
        .unwrap();
    let error = manifest
        .allows(&secret, Verb::Delete, Some("prod"), None)
        .unwrap_err();
    assert_eq!(error.missing, Missing::Namespace);
}

#[test]
fn cache_may_repeat_the_for_kind_to_read_all_of_its_objects() {
    let text = format!(
        "{MINIMAL}labelSelector: replicate=true\ncache: [{{apiVersion: v1, kind: ConfigMap}}]\n"
    );
    let manifest = Manifest::parse(&text, Path::new("/plugins")).unwrap();
    assert_eq!(manifest.cache, vec![manifest.for_kind.clone()]);
}

#[test]
fn reads_covers_the_for_owns_and_cache_kinds_only() {
    let manifest = parse(FULL).unwrap();
    assert!(manifest.reads(&KindRef::new("example.com/v1", "Website")));
    assert!(manifest.reads(&deployment()));
    assert!(manifest.reads(&KindRef::new("v1", "Namespace")));
    assert!(!manifest.reads(&KindRef::new("v1", "Secret")));
    assert!(!manifest.reads(&KindRef::new("apps/v1beta1", "Deployment")));
}

#[test]
fn verbs_display_as_lowercase_kubernetes_verbs() {
    let shown: Vec<String> = Verb::ALL.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["get", "create", "update", "patch", "delete"]);
}

#[test]
fn a_shadow_defaults_to_every_reconcile_with_the_plugins_limits_and_env() {
    let manifest = parse(&format!(
        "{MINIMAL}limits: {{deadline: 3s}}\nenv: {{A: '1'}}\nshadow: {{module: lib/v2.wasm}}\n\
         canary: {{selector: 'track in (canary)', module: v3.wasm}}\n"
    ))
    .unwrap();
    let shadow = manifest.shadow.expect("a shadow");
    assert_eq!(shadow.module, Path::new("/plugins/web/lib/v2.wasm"));
    assert!((shadow.sample - 1.0).abs() < f64::EPSILON);
    assert_eq!(shadow.limits, manifest.limits);
    assert_eq!(shadow.env, [("A".to_owned(), "1".to_owned())]);
    let canary = manifest.canary.expect("a canary");
    assert_eq!(canary.module, Path::new("/plugins/web/v3.wasm"));
    assert!(
        canary
            .selector
            .matches_by(|l| (l == "track").then_some("canary"))
    );
    assert!(!canary.selector.matches_by(|_| None));

    let own = parse(&format!(
        "{MINIMAL}shadow: {{module: v2.wasm, sample: 0.25, limits: {{memory: 8Mi}}, env: {{B: '2'}}}}\n"
    ))
    .unwrap()
    .shadow
    .expect("a shadow");
    assert!((own.sample - 0.25).abs() < f64::EPSILON);
    assert_eq!(own.limits.memory, 8 << 20);
    assert_eq!(own.limits.deadline, Limits::default().deadline);
    assert_eq!(own.env, [("B".to_owned(), "2".to_owned())]);
}
