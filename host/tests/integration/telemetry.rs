//! The telemetry server over real HTTP: metrics after a controller run, readiness, shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use parking_lot::Mutex;
use reconcile_host::controller::{Action, Controller, ObjectKey, Reconciler, Request};
use reconcile_host::queue::{ItemExponential, RateLimitingQueue};
use reconcile_host::telemetry::{Exposure, OPENMETRICS_CONTENT_TYPE, Telemetry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// How long any condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

// ---- a minimal HTTP/1.1 client -------------------------------------------------------------

struct Response {
    status: u16,
    content_type: String,
    body: String,
}

async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<Response> {
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("failed to connect to the telemetry server at {addr}"))?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .context("failed to send the request")?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .context("failed to read the response")?;
    let raw = String::from_utf8(raw).context("response is not UTF-8")?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .context("response has no end of headers")?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("malformed status line in {head:?}"))?;
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|te| te == "chunked")
    {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Ok(Response {
        status,
        content_type: headers.get("content-type").cloned().unwrap_or_default(),
        body,
    })
}

fn dechunk(mut chunked: &str) -> anyhow::Result<String> {
    let mut body = String::new();
    loop {
        let (size, rest) = chunked.split_once("\r\n").context("truncated chunk size")?;
        let size = usize::from_str_radix(size.trim(), 16).context("malformed chunk size")?;
        if size == 0 {
            return Ok(body);
        }
        ensure!(rest.len() >= size + 2, "truncated chunk");
        body.push_str(&rest[..size]);
        chunked = &rest[size + 2..];
    }
}

/// The value of the sample `series` (name and labels exactly as exposed) in `text`.
fn sample(text: &str, series: &str) -> anyhow::Result<f64> {
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .with_context(|| format!("no sample {series} in:\n{text}"))?;
    line.split(' ')
        .next()
        .unwrap_or_default()
        .parse()
        .with_context(|| format!("sample {series} has a malformed value {line:?}"))
}

/// Polls `condition` every few milliseconds until it holds, failing after [`PATIENCE`].
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) -> anyhow::Result<()> {
    tokio::time::timeout(PATIENCE, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .with_context(|| format!("timed out after {PATIENCE:?} waiting until {what}"))
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(PATIENCE, future)
        .await
        .with_context(|| format!("timed out after {PATIENCE:?} waiting until {what}"))
}

// ---- a native reconciler ---------------------------------------------------------------------

#[derive(Debug, thiserror::Error)]
#[error("scripted failure")]
struct Failure;

/// What the reconciler does and saw; shared between the test and the controller.
#[derive(Default)]
struct Script {
    failures_left: Mutex<u32>,
    slow_started: CancellationToken,
    release_slow: CancellationToken,
    succeeded: Mutex<Vec<String>>,
}

/// Fails `ns/bad` as often as told, holds `ns/slow` until released, reconciles everything
/// else at once.
#[derive(Clone, Default)]
struct Scripted(Arc<Script>);

impl std::ops::Deref for Scripted {
    type Target = Script;
    fn deref(&self) -> &Script {
        &self.0
    }
}

impl Reconciler for Scripted {
    type Object = String;
    type Error = Failure;

    async fn reconcile(&self, request: Request<String>) -> Result<Action, Failure> {
        let key = request.key.to_string();
        match key.as_str() {
            "ns/bad" => {
                let mut left = self.failures_left.lock();
                if *left > 0 {
                    *left -= 1;
                    return Err(Failure);
                }
            }
            "ns/slow" => {
                self.slow_started.cancel();
                self.release_slow.cancelled().await;
            }
            _ => {}
        }
        self.succeeded.lock().push(key);
        Ok(Action::Done)
    }
}

const KEYS: [&str; 5] = ["ns/a", "ns/b", "ns/c", "ns/bad", "ns/slow"];

async fn serve(
    telemetry: &Telemetry,
) -> anyhow::Result<(reconcile_host::telemetry::Server, CancellationToken)> {
    let shutdown = CancellationToken::new();
    let server = telemetry
        .serve("127.0.0.1:0".parse()?, Exposure::Open, shutdown.clone())
        .await
        .context("failed to start the telemetry server")?;
    Ok((server, shutdown))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_exposes_every_metric_with_sensible_values_after_a_run()
-> anyhow::Result<()> {
    let telemetry = Telemetry::new();
    let (server, shutdown) = serve(&telemetry).await?;
    let addr = server.local_addr();
    let metrics = telemetry.metrics();

    let leader = metrics.leader_election("reconcile-host");
    leader.set_leading(true);
    let queue = RateLimitingQueue::with_metrics(
        ItemExponential::new(Duration::from_millis(1), Duration::from_millis(10)),
        metrics.workqueue("configmaps"),
    );
    let _unfinished = metrics.report_unfinished_work_on_scrape(&queue);
    let reconciler = Scripted(Arc::new(Script {
        failures_left: Mutex::new(2),
        ..Script::default()
    }));
    let controller = Arc::new(Controller::with_metrics(
        "configmaps",
        queue.clone(),
        reconciler.clone(),
        |_: &ObjectKey| None,
        2,
        metrics.controller("configmaps", 2),
    ));
    let intake = CancellationToken::new();
    let workers = tokio::spawn({
        let (controller, intake) = (Arc::clone(&controller), intake.clone());
        async move { controller.run(intake, CancellationToken::new()).await }
    });
    for key in KEYS {
        queue.add(ObjectKey::parse(key));
    }

    // Mid-run: `ns/slow` holds a worker while the rest finish.
    within("ns/slow starts", reconciler.slow_started.cancelled()).await?;
    eventually("every key but ns/slow succeeded", || {
        reconciler.succeeded.lock().len() == KEYS.len() - 1
    })
    .await?;
    let during = http_get(addr, "/metrics").await?;
    ensure!(during.status == 200, "GET /metrics: {}", during.status);
    ensure!(
        during.content_type == OPENMETRICS_CONTENT_TYPE,
        "content type {:?}",
        during.content_type
    );
    let text = &during.body;
    ensure!(
        sample(
            text,
            r#"controller_runtime_active_workers{controller="configmaps"}"#
        )? == 1.0
    );
    let unfinished = sample(
        text,
        r#"workqueue_unfinished_work_seconds{name="configmaps"}"#,
    )?;
    let longest = sample(
        text,
        r#"workqueue_longest_running_processor_seconds{name="configmaps"}"#,
    )?;
    ensure!(
        unfinished > 0.0 && longest > 0.0 && longest <= unfinished,
        "a held key is unfinished work, refreshed on scrape: \
         unfinished {unfinished}, longest {longest}"
    );

    // Drained.
    reconciler.release_slow.cancel();
    eventually("the queue drains", || {
        reconciler.succeeded.lock().len() == KEYS.len()
            && queue.is_empty()
            && queue.processing() == 0
            && queue.waiting() == 0
    })
    .await?;
    let after = http_get(addr, "/metrics").await?;
    let text = &after.body;
    for (family, kind) in [
        ("workqueue_depth", "gauge"),
        ("workqueue_adds", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("workqueue_unfinished_work_seconds", "gauge"),
        ("workqueue_longest_running_processor_seconds", "gauge"),
        ("workqueue_retries", "counter"),
        ("controller_runtime_reconcile", "counter"),
        ("controller_runtime_reconcile_errors", "counter"),
        ("controller_runtime_reconcile_time_seconds", "histogram"),
        ("controller_runtime_active_workers", "gauge"),
        ("controller_runtime_max_concurrent_reconciles", "gauge"),
        ("leader_election_master_status", "gauge"),
    ] {
        let declared = format!("# TYPE {family} {kind}");
        ensure!(
            text.lines().any(|l| l == declared),
            "missing {declared:?} in:\n{text}"
        );
    }
    let expected = [
        // Five keys plus two rate-limited re-adds of ns/bad, each taken and finished once.
        (r#"workqueue_adds_total{name="configmaps"}"#, 7.0),
        (r#"workqueue_retries_total{name="configmaps"}"#, 2.0),
        (r#"workqueue_depth{name="configmaps"}"#, 0.0),
        (
            r#"workqueue_queue_duration_seconds_count{name="configmaps"}"#,
            7.0,
        ),
        (
            r#"workqueue_work_duration_seconds_count{name="configmaps"}"#,
            7.0,
        ),
        (
            r#"workqueue_unfinished_work_seconds{name="configmaps"}"#,
            0.0,
        ),
        (
            r#"workqueue_longest_running_processor_seconds{name="configmaps"}"#,
            0.0,
        ),
        (
            r#"controller_runtime_reconcile_total{controller="configmaps",result="success"}"#,
            5.0,
        ),
        (
            r#"controller_runtime_reconcile_total{controller="configmaps",result="error"}"#,
            2.0,
        ),
        (
            r#"controller_runtime_reconcile_total{controller="configmaps",result="requeue"}"#,
            0.0,
        ),
        (
            r#"controller_runtime_reconcile_total{controller="configmaps",result="requeue_after"}"#,
            0.0,
        ),
        (
            r#"controller_runtime_reconcile_errors_total{controller="configmaps"}"#,
            2.0,
        ),
        (
            r#"controller_runtime_reconcile_time_seconds_count{controller="configmaps"}"#,
            7.0,
        ),
        (
            r#"controller_runtime_active_workers{controller="configmaps"}"#,
            0.0,
        ),
        (
            r#"controller_runtime_max_concurrent_reconciles{controller="configmaps"}"#,
            2.0,
        ),
        (
            r#"leader_election_master_status{name="reconcile-host"}"#,
            1.0,
        ),
    ];
    for (series, value) in expected {
        let got = sample(text, series)?;
        ensure!(got == value, "{series} is {got}, expected {value}");
    }
    let held = sample(
        text,
        r#"workqueue_work_duration_seconds_sum{name="configmaps"}"#,
    )?;
    ensure!(
        held >= longest,
        "work duration {held} s covers the {longest} s ns/slow was seen held"
    );
    ensure!(text.ends_with("# EOF\n"), "no OpenMetrics EOF marker");

    intake.cancel();
    within("the workers stop", workers).await??;
    shutdown.cancel();
    within("the server stops", server).await??;
    Ok(())
}

#[tokio::test]
async fn readyz_answers_503_until_every_check_passes_then_200() -> anyhow::Result<()> {
    let telemetry = Telemetry::new();
    let cache = telemetry.health().gate("cache/v1/ConfigMap")?;
    let leader = telemetry.health().gate("leader-election")?;
    let (server, shutdown) = serve(&telemetry).await?;
    let addr = server.local_addr();

    let before = http_get(addr, "/readyz").await?;
    ensure!(before.status == 503, "not ready yet, got {}", before.status);
    ensure!(
        before.body
            == "[-]cache/v1/ConfigMap failed: not ready yet\n\
                [-]leader-election failed: not ready yet\n\
                readyz check failed\n",
        "body {:?}",
        before.body
    );

    cache.set_ready();
    let half = http_get(addr, "/readyz").await?;
    ensure!(
        half.status == 503,
        "leader-election still fails, got {}",
        half.status
    );
    ensure!(
        half.body
            .starts_with("[+]cache/v1/ConfigMap ok\n[-]leader-election failed: "),
        "body {:?}",
        half.body
    );

    leader.set_ready();
    let ready = http_get(addr, "/readyz").await?;
    ensure!(
        ready.status == 200,
        "every check passes, got {}",
        ready.status
    );
    ensure!(
        ready.body == "[+]cache/v1/ConfigMap ok\n[+]leader-election ok\nreadyz check passed\n",
        "body {:?}",
        ready.body
    );

    let health = http_get(addr, "/healthz").await?;
    ensure!(
        health.status == 200 && health.body == "ok",
        "healthz {} {:?}",
        health.status,
        health.body
    );

    shutdown.cancel();
    within("the server stops", server).await??;
    Ok(())
}

#[tokio::test]
async fn server_stops_serving_once_the_shutdown_token_is_cancelled() -> anyhow::Result<()> {
    let telemetry = Telemetry::new();
    let (server, shutdown) = serve(&telemetry).await?;
    let addr = server.local_addr();
    let alive = http_get(addr, "/healthz").await?;
    ensure!(alive.status == 200, "healthz {}", alive.status);

    shutdown.cancel();
    within("the server stops", server).await??;
    if TcpStream::connect(addr).await.is_ok() {
        bail!("{addr} still accepts connections after shutdown");
    }
    Ok(())
}

#[tokio::test]
async fn shutdown_completes_while_a_scraper_holds_an_idle_keep_alive_connection()
-> anyhow::Result<()> {
    let telemetry = Telemetry::new();
    let (server, shutdown) = serve(&telemetry).await?;
    let mut scraper = TcpStream::connect(server.local_addr()).await?;
    scraper
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: telemetry\r\n\r\n")
        .await?;
    let mut response = Vec::new();
    within("the keep-alive response arrives", async {
        let mut buf = [0_u8; 1024];
        while !response.ends_with(b"\r\n\r\nok") {
            let read = scraper.read(&mut buf).await?;
            ensure!(read > 0, "connection closed before the response ended");
            response.extend_from_slice(&buf[..read]);
        }
        anyhow::Ok(())
    })
    .await??;

    shutdown.cancel();
    within("the server stops with a connection still open", server).await??;
    Ok(())
}
