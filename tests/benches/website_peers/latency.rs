//! Updates at a fixed rate and the time until each one's status is written, seen through a watch
//! of the Websites.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use parking_lot::Mutex;

/// The name of Website `i`.
pub fn site(i: usize) -> String {
    format!("site-{i:05}")
}

/// A Website's generation, its status's `observedGeneration`, and when the watch first saw that.
type Seen = (i64, i64, Instant);

/// Each Website's [`Seen`], kept current by a watch.
#[derive(Clone)]
pub struct Statuses(Arc<Mutex<HashMap<String, Seen>>>);

impl Statuses {
    /// Starts following the Websites of `api`.
    pub fn follow(api: Api<DynamicObject>) -> Self {
        use futures::StreamExt;
        use kube::runtime::watcher::{self, Event};

        let seen = Statuses(Arc::default());
        let map = Arc::clone(&seen.0);
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let website = match event {
                    Ok(Event::Apply(website) | Event::InitApply(website)) => website,
                    Ok(_) => continue,
                    Err(error) => {
                        println!("  the Website watch failed, retrying: {error}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                let observed = website
                    .data
                    .get("status")
                    .and_then(|status| status.get("observedGeneration"))
                    .and_then(serde_json::Value::as_i64)
                    .unwrap_or(0);
                let generation = website.metadata.generation.unwrap_or(0);
                let name = website.metadata.name.unwrap_or_default();
                let mut map = map.lock();
                let entry = map
                    .entry(name)
                    .or_insert((generation, observed, Instant::now()));
                entry.0 = generation;
                if entry.1 != observed {
                    *entry = (generation, observed, Instant::now());
                }
            }
        });
        seen
    }

    /// When the watch first saw `name`'s status at `generation` or later.
    fn at(&self, name: &str, generation: i64) -> Option<Instant> {
        let map = self.0.lock();
        let (_, observed, since) = map.get(name)?;
        (*observed >= generation).then_some(*since)
    }

    /// Waits until `count` Websites have their status at their generation.
    pub async fn wait_all_at_generation(&self, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let done = self
                .0
                .lock()
                .values()
                .filter(|(generation, observed, _)| generation == observed)
                .count();
            if done >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "website_peers: {done} of {count} Websites at their generation within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Gives `updates` of the `count` Websites `spec.replicas = replicas`, `rate` per second, each
/// Website at most once; the latency of each, from its update's answer to the watch seeing its
/// status at the new generation, in milliseconds, sorted.
pub async fn updates(
    api: &Api<DynamicObject>,
    count: usize,
    updates: usize,
    rate: u64,
    replicas: u64,
) -> Vec<f64> {
    assert!(
        updates <= count,
        "website_peers: UPDATES={updates} exceeds WEBSITES={count}; each update takes its own Website"
    );
    let statuses = Statuses::follow(api.clone());
    statuses
        .wait_all_at_generation(count, Duration::from_secs(120))
        .await;
    // Spread over the names: a stride coprime with the count.
    let stride = (1..)
        .map(|k| count / 2 + k)
        .find(|s| gcd(*s, count) == 1)
        .expect("a stride");
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = tokio::task::JoinSet::new();
    for i in 0..updates {
        interval.tick().await;
        let name = site(i * stride % count);
        let api = api.clone();
        sent.spawn(async move {
            let patch = serde_json::json!({"spec": {"replicas": replicas}});
            let updated = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap_or_else(|error| panic!("Website {name} not updated: {error}"));
            let generation = updated.metadata.generation.expect("a generation");
            (name, generation, Instant::now())
        });
    }
    let mut answered = Vec::with_capacity(updates);
    while let Some(result) = sent.join_next().await {
        answered.push(result.expect("an updating task panicked"));
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut latencies = Vec::with_capacity(updates);
    for (name, generation, at) in answered {
        let seen = loop {
            if let Some(seen) = statuses.at(&name, generation) {
                break seen;
            }
            assert!(
                Instant::now() < deadline,
                "website_peers: Website {name}'s status never reached generation {generation}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        latencies.push(seen.saturating_duration_since(at).as_secs_f64() * 1e3);
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The `q` quantile of sorted `values` (nearest rank).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}
