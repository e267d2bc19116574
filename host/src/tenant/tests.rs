//! The tenant shares: one share per namespace, calls at once bounded, memory charged and refused.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::config::CeilingsSettings;

fn manifest(text: &str) -> Manifest {
    let base = "name: p\nmodule: p.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n";
    Manifest::parse(&format!("{base}{text}"), Path::new("/tmp")).expect("manifest")
}

fn tenants(instances: u32) -> Tenants {
    Tenants::new(TenantsConfig {
        default: CeilingsSettings {
            instances: Some(instances),
            memory: Some("2Mi".into()),
            ..CeilingsSettings::default()
        },
        ..TenantsConfig::default()
    })
}

#[test]
fn plugins_acting_as_accounts_of_one_namespace_share_one_tenant() {
    let tenants = tenants(2);
    let a = tenants
        .of(&manifest(
            "serviceAccountName: one\nserviceAccountNamespace: team-a\n",
        ))
        .expect("a tenant");
    let b = tenants
        .of(&manifest(
            "serviceAccountName: two\nserviceAccountNamespace: team-a\n",
        ))
        .expect("a tenant");
    let c = tenants
        .of(&manifest(
            "serviceAccountName: one\nserviceAccountNamespace: team-b\n",
        ))
        .expect("a tenant");
    assert!(Arc::ptr_eq(&a, &b), "two accounts of team-a: one share");
    assert!(!Arc::ptr_eq(&a, &c), "team-b has its own");
    assert_eq!((a.namespace(), c.namespace()), ("team-a", "team-b"));
    assert!(
        tenants.of(&manifest("")).is_none(),
        "a plugin acting as the host belongs to no tenant"
    );
}

#[tokio::test(start_paused = true)]
async fn no_more_calls_run_at_once_than_the_instances_ceiling() {
    let share = tenants(2).share("team-a");
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (share, running, most) = (share.clone(), running.clone(), most.clone());
            tokio::spawn(async move {
                let _slot = share.run_slot().await;
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    let started = tokio::time::Instant::now();
    for call in calls {
        call.await.expect("the call ends");
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(300),
        "six calls of 100 ms, two at a time"
    );
}

#[test]
fn memory_past_the_ceiling_is_refused_and_counted() {
    let metrics = Metrics::new();
    let share = tenants(1).with_metrics(metrics.clone()).share("team-a");
    assert!(share.charge_memory(1 << 20));
    assert!(!share.charge_memory((1 << 20) + 1), "past 2Mi");
    share.credit_memory(1 << 20);
    assert!(share.charge_memory(2 << 20));
    let text = metrics.encode();
    assert!(
        text.contains("reconcile_host_tenant_memory_bytes{namespace=\"team-a\"} 2097152"),
        "{text}"
    );
    assert!(
        text.contains("reconcile_host_tenant_memory_refusals_total{namespace=\"team-a\"} 1"),
        "{text}"
    );
}
