//! Test guest for the scale-out tests. For each ConfigMap it reconciles it logs
//! `ledger begin <namespace>/<name> v=<data.v> at=<µs since the epoch>`, computes for `data.ms`
//! milliseconds, records `data.v` in the annotation `ledger.test/seen` (and the replica, the
//! manifest's env `REPLICA`, in `ledger.test/by`, and, with env `WITNESS=true`, the reconcile's
//! start in µs since the epoch in `ledger.test/begin`) unless it is there already, then logs
//! `ledger end ... wrote=<ok|skip>`. A refused write fails the reconcile after logging
//! `ledger refused`. `data.us` adds microseconds of work, `data.waitMs` milliseconds of sleep
//! after the work (a reconcile waiting on something, not computing); `data.quiet: "true"` logs
//! nothing (the scale-out benchmark).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reconcile_guest::{Action, Error, Reconciler, Request, client, info};

struct Ledger;

fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros())
}

impl Reconciler for Ledger {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let Some(object) = request.object::<serde_json::Value>()? else {
            return Ok(Action::done());
        };
        let key = format!(
            "{}/{}",
            request.namespace().unwrap_or_default(),
            request.name()
        );
        let version = object["data"]["v"].as_str().unwrap_or("0").to_owned();
        let seen = object["metadata"]["annotations"]["ledger.test/seen"].as_str();
        let quiet = object["data"]["quiet"].as_str() == Some("true");
        let begin = micros();
        if !quiet {
            info!("ledger begin {key} v={version} at={begin}");
        }
        let number = |field: &str| -> u64 {
            object["data"][field]
                .as_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let work = Duration::from_millis(number("ms")) + Duration::from_micros(number("us"));
        let start = Instant::now();
        while start.elapsed() < work {
            std::hint::black_box(0);
        }
        let wait = number("waitMs");
        if wait > 0 {
            std::thread::sleep(Duration::from_millis(wait));
        }
        let wrote = if seen == Some(version.as_str()) {
            "skip"
        } else {
            let replica = std::env::var("REPLICA").unwrap_or_default();
            let mut annotations = serde_json::json!({
                "ledger.test/seen": version,
                "ledger.test/by": replica,
            });
            if std::env::var("WITNESS").as_deref() == Ok("true") {
                annotations["ledger.test/begin"] = begin.to_string().into();
            }
            let patch = serde_json::json!({"metadata": {"annotations": annotations}});
            if let Err(error) = client::merge_patch(request.target(), &patch) {
                info!("ledger refused {key} v={version} at={}", micros());
                return Err(error);
            }
            "ok"
        };
        if !quiet {
            info!("ledger end {key} v={version} at={} wrote={wrote}", micros());
        }
        Ok(Action::done())
    }
}

reconcile_guest::export_reconciler!(Ledger);
