//! Test guest for the scale-out tests. For each ConfigMap it reconciles it logs
//! `ledger begin <namespace>/<name> v=<data.v> at=<µs since the epoch>`, computes for `data.ms`
//! milliseconds, records `data.v` in the annotation `ledger.test/seen` (and the replica, the
//! manifest's env `REPLICA`, in `ledger.test/by`) unless it is there already, then logs
//! `ledger end ... wrote=<ok|skip>`. A refused write fails the reconcile after logging
//! `ledger refused`.

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
        info!("ledger begin {key} v={version} at={}", micros());
        let ms: u64 = object["data"]["ms"]
            .as_str()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(0);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(ms) {
            std::hint::black_box(0);
        }
        let wrote = if seen == Some(version.as_str()) {
            "skip"
        } else {
            let replica = std::env::var("REPLICA").unwrap_or_default();
            let patch = serde_json::json!({"metadata": {"annotations": {
                "ledger.test/seen": version,
                "ledger.test/by": replica,
            }}});
            if let Err(error) = client::merge_patch(request.target(), &patch) {
                info!("ledger refused {key} v={version} at={}", micros());
                return Err(error);
            }
            "ok"
        };
        info!("ledger end {key} v={version} at={} wrote={wrote}", micros());
        Ok(Action::done())
    }
}

reconcile_guest::export_reconciler!(Ledger);
