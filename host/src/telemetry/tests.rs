//! The metric mappings: drive each hook, encode, and assert the exposed lines exactly.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::watch;

use super::*;
use crate::controller::{Outcome, ReconcileMetrics};
use crate::election::Leadership;
use crate::queue::{QueueMetrics, RateLimitingQueue};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The encoded lines that start with `prefix`.
fn lines(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn workqueue_hooks_expose_client_go_names_labels_and_values() {
    let metrics = Metrics::new();
    let hook = metrics.workqueue("configmaps");
    hook.add();
    hook.add();
    hook.depth(1);
    hook.depth(1);
    hook.depth(-1);
    hook.queue_latency(ms(250));
    hook.work_duration(ms(1500));
    hook.unfinished_work(4.5, 3.0);
    hook.retry();
    let text = metrics.encode();
    for line in [
        "# TYPE workqueue_depth gauge",
        r#"workqueue_depth{name="configmaps"} 1"#,
        "# TYPE workqueue_adds counter",
        r#"workqueue_adds_total{name="configmaps"} 2"#,
        "# TYPE workqueue_queue_duration_seconds histogram",
        r#"workqueue_queue_duration_seconds_sum{name="configmaps"} 0.25"#,
        r#"workqueue_queue_duration_seconds_count{name="configmaps"} 1"#,
        r#"workqueue_queue_duration_seconds_bucket{le="0.1",name="configmaps"} 0"#,
        r#"workqueue_queue_duration_seconds_bucket{le="1.0",name="configmaps"} 1"#,
        "# TYPE workqueue_work_duration_seconds histogram",
        r#"workqueue_work_duration_seconds_sum{name="configmaps"} 1.5"#,
        r#"workqueue_work_duration_seconds_bucket{le="1.0",name="configmaps"} 0"#,
        r#"workqueue_work_duration_seconds_bucket{le="10.0",name="configmaps"} 1"#,
        "# TYPE workqueue_unfinished_work_seconds gauge",
        r#"workqueue_unfinished_work_seconds{name="configmaps"} 4.5"#,
        "# TYPE workqueue_longest_running_processor_seconds gauge",
        r#"workqueue_longest_running_processor_seconds{name="configmaps"} 3.0"#,
        "# TYPE workqueue_retries counter",
        r#"workqueue_retries_total{name="configmaps"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing line {line:?} in:\n{text}"
        );
    }
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(!text.contains("_total_total"), "{text}");
}

#[test]
fn workqueue_histograms_use_client_go_buckets_from_ten_nanoseconds_to_ten_seconds() {
    let metrics = Metrics::new();
    let _hook = metrics.workqueue("q");
    let bounds: Vec<String> = lines(&metrics.encode(), "workqueue_queue_duration_seconds_bucket")
        .iter()
        .map(|line| line.split('"').nth(1).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        bounds,
        [
            "1e-8", "1e-7", "0.000001", "0.00001", "0.0001", "0.001", "0.01", "0.1", "1.0", "10.0",
            "+Inf"
        ]
    );
}

#[test]
fn controller_hooks_expose_controller_runtime_names_with_every_result_at_zero() {
    let metrics = Metrics::new();
    let _hook = metrics.controller("web", 4);
    let text = metrics.encode();
    for result in ["success", "requeue", "requeue_after", "error"] {
        let line = format!(
            r#"controller_runtime_reconcile_total{{controller="web",result="{result}"}} 0"#
        );
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    for line in [
        "# TYPE controller_runtime_reconcile counter",
        r#"controller_runtime_reconcile_errors_total{controller="web"} 0"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="web"} 0"#,
        r#"controller_runtime_active_workers{controller="web"} 0"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="web"} 4"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    assert_eq!(
        lines(&text, "controller_runtime_reconcile_time_seconds_bucket").len(),
        RECONCILE_TIME_BUCKETS.len() + 1,
        "controller-runtime's buckets plus +Inf"
    );
}

#[test]
fn reconciled_outcomes_count_by_result_and_errors_count_twice() {
    let metrics = Metrics::new();
    let hook = metrics.controller("web", 2);
    hook.active_workers(1);
    hook.active_workers(1);
    hook.active_workers(-1);
    hook.reconciled(Outcome::Success, ms(20));
    hook.reconciled(Outcome::Success, ms(30));
    hook.reconciled(Outcome::Requeue, ms(1));
    hook.reconciled(Outcome::RequeueAfter, ms(1));
    hook.reconciled(Outcome::Error, ms(2_000));
    let text = metrics.encode();
    for line in [
        r#"controller_runtime_reconcile_total{controller="web",result="success"} 2"#,
        r#"controller_runtime_reconcile_total{controller="web",result="requeue"} 1"#,
        r#"controller_runtime_reconcile_total{controller="web",result="requeue_after"} 1"#,
        r#"controller_runtime_reconcile_total{controller="web",result="error"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="web"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="web"} 5"#,
        r#"controller_runtime_reconcile_time_seconds_sum{controller="web"} 2.052"#,
        r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="web"} 2"#,
        r#"controller_runtime_reconcile_time_seconds_bucket{le="0.05",controller="web"} 4"#,
        r#"controller_runtime_reconcile_time_seconds_bucket{le="2.0",controller="web"} 5"#,
        r#"controller_runtime_active_workers{controller="web"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
}

#[test]
fn leader_status_reports_one_while_leading_and_zero_otherwise() {
    let metrics = Metrics::new();
    let status = metrics.leader_election("reconcile-host");
    let series = |text: &str| lines(text, "leader_election_master_status{");
    assert_eq!(
        series(&metrics.encode()),
        [r#"leader_election_master_status{name="reconcile-host"} 0"#]
    );
    status.set_leading(true);
    assert!(status.is_leading());
    assert_eq!(
        series(&metrics.encode()),
        [r#"leader_election_master_status{name="reconcile-host"} 1"#]
    );
    status.set_leading(false);
    assert_eq!(
        series(&metrics.encode()),
        [r#"leader_election_master_status{name="reconcile-host"} 0"#]
    );
}

#[test]
fn leadership_is_read_from_the_electors_channel_on_every_scrape() {
    let metrics = Metrics::new();
    let (publish, leadership) = watch::channel(Leadership::Following { leader: None });
    let _hook = metrics.report_leadership_on_scrape("reconcile-host", leadership);
    let series = |text: &str| lines(text, "leader_election_master_status{");
    let expect = |value: u8| {
        vec![format!(
            r#"leader_election_master_status{{name="reconcile-host"}} {value}"#
        )]
    };
    assert_eq!(series(&metrics.encode()), expect(0));
    let term = tokio_util::sync::CancellationToken::new();
    publish.send_replace(Leadership::Leading { term });
    assert_eq!(series(&metrics.encode()), expect(1));
    publish.send_replace(Leadership::Following {
        leader: Some("other".to_owned()),
    });
    assert_eq!(series(&metrics.encode()), expect(0));
}

#[test]
fn max_concurrent_reconciles_reports_at_least_one_worker_as_the_controller_runs() {
    let metrics = Metrics::new();
    let _hook = metrics.controller("web", 0);
    assert_eq!(
        lines(
            &metrics.encode(),
            "controller_runtime_max_concurrent_reconciles{"
        ),
        [r#"controller_runtime_max_concurrent_reconciles{controller="web"} 1"#]
    );
}

#[test]
fn two_hooks_for_one_name_share_their_series() {
    let metrics = Metrics::new();
    metrics.workqueue("q").add();
    metrics.workqueue("q").add();
    assert_eq!(
        lines(&metrics.encode(), "workqueue_adds_total"),
        [r#"workqueue_adds_total{name="q"} 2"#]
    );
}

#[tokio::test(start_paused = true)]
async fn unfinished_work_is_refreshed_from_the_queue_on_every_scrape() {
    let metrics = Metrics::new();
    let queue = RateLimitingQueue::<String>::with_metrics(
        crate::queue::default_controller_limiter(),
        metrics.workqueue("q"),
    );
    let _refresh = metrics.report_unfinished_work_on_scrape(&queue);
    queue.add("a".to_owned());
    queue.add("b".to_owned());
    let a = queue.get().await.expect("queue is running");
    tokio::time::advance(Duration::from_secs(2)).await;
    let b = queue.get().await.expect("queue is running");
    tokio::time::advance(Duration::from_secs(1)).await;
    let text = metrics.encode();
    assert_eq!(
        lines(&text, "workqueue_unfinished_work_seconds{"),
        [r#"workqueue_unfinished_work_seconds{name="q"} 4.0"#],
        "3 s of `a` plus 1 s of `b`"
    );
    assert_eq!(
        lines(&text, "workqueue_longest_running_processor_seconds{"),
        [r#"workqueue_longest_running_processor_seconds{name="q"} 3.0"#]
    );
    queue.done(&a);
    queue.done(&b);
    let text = metrics.encode();
    assert_eq!(
        lines(&text, "workqueue_unfinished_work_seconds{"),
        [r#"workqueue_unfinished_work_seconds{name="q"} 0.0"#]
    );
    assert_eq!(
        lines(&text, "workqueue_depth{"),
        [r#"workqueue_depth{name="q"} 0"#]
    );
}

#[test]
fn dropping_a_scrape_hook_stops_its_refresh() {
    let metrics = Metrics::new();
    let calls = Arc::new(AtomicU64::new(0));
    let hook = metrics.on_scrape({
        let calls = Arc::clone(&calls);
        move || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let _ = metrics.encode();
    let _ = metrics.encode();
    drop(hook);
    let _ = metrics.encode();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn plugin_costs_expose_guest_instantiate_import_and_api_wait_seconds() {
    use crate::wasm::cost::{CallCost, IMPORT_COUNT, Import};
    let metrics = Metrics::new();
    let costs = metrics.plugin_costs("web");
    let mut host = [Duration::ZERO; IMPORT_COUNT];
    let mut calls = [0; IMPORT_COUNT];
    host[Import::ClientApply as usize] = Duration::from_micros(250);
    calls[Import::ClientApply as usize] = 2;
    let cost = CallCost {
        guest: Duration::from_micros(500),
        instantiate: Duration::from_micros(125),
        host,
        calls,
        api_wait: ms(2),
    };
    costs.add(&cost);
    costs.add(&cost);
    let text = metrics.encode();
    assert_eq!(
        lines(&text, "reconcile_host_plugin_guest_seconds_total"),
        ["reconcile_host_plugin_guest_seconds_total{plugin=\"web\"} 0.001"]
    );
    assert_eq!(
        lines(&text, "reconcile_host_plugin_instantiate_seconds_total"),
        ["reconcile_host_plugin_instantiate_seconds_total{plugin=\"web\"} 0.00025"]
    );
    assert_eq!(
        lines(&text, "reconcile_host_plugin_api_wait_seconds_total"),
        ["reconcile_host_plugin_api_wait_seconds_total{plugin=\"web\"} 0.004"]
    );
    let imports = lines(&text, "reconcile_host_plugin_import_");
    assert_eq!(
        imports.len(),
        2 * IMPORT_COUNT,
        "every import starts at zero"
    );
    assert!(imports.contains(
        &"reconcile_host_plugin_import_seconds_total{plugin=\"web\",import=\"client.apply\"} 0.0005"
            .to_owned()
    ));
    assert!(
        imports.contains(
            &"reconcile_host_plugin_import_calls_total{plugin=\"web\",import=\"client.apply\"} 4"
                .to_owned()
        )
    );
    assert!(
        imports.contains(
            &"reconcile_host_plugin_import_calls_total{plugin=\"web\",import=\"cache.get\"} 0"
                .to_owned()
        )
    );
}

#[test]
fn a_modules_series_go_when_the_last_handle_for_it_goes() {
    let metrics = Metrics::new();
    let series = |text: &str, module: &str| {
        lines(text, "reconcile_host_plugin_module_reconciles_total")
            .into_iter()
            .filter(|line| line.contains(&format!("module=\"{module}\"")))
            .count()
    };
    let old = metrics.plugin_module("p", "aaaaaaaaaaaa1111", &["success", "error"]);
    old.observe("success", 0.01);
    // The same module loaded again (a rollback to it) shares the series.
    let again = metrics.plugin_module("p", "aaaaaaaaaaaa1111", &["success", "error"]);
    let new = metrics.plugin_module("p", "bbbbbbbbbbbb2222", &["success", "error"]);
    assert_eq!(series(&metrics.encode(), "aaaaaaaaaaaa"), 2);
    drop(old);
    let text = metrics.encode();
    assert_eq!(series(&text, "aaaaaaaaaaaa"), 2, "still held:\n{text}");
    assert!(
        text.contains("module=\"aaaaaaaaaaaa\",result=\"success\"} 1"),
        "{text}"
    );
    drop(again);
    let text = metrics.encode();
    assert_eq!(series(&text, "aaaaaaaaaaaa"), 0, "replaced module:\n{text}");
    assert!(
        !lines(&text, "reconcile_host_plugin_module_reconcile_time_seconds")
            .iter()
            .any(|line| line.contains("aaaaaaaaaaaa")),
        "{text}"
    );
    assert_eq!(series(&text, "bbbbbbbbbbbb"), 2);
    drop(new);
}
