//! A minimal kube-runtime controller: one `Controller` over one custom resource, given on the
//! command line, watched as `DynamicObject`, with a reconciler that does nothing. The density
//! bench (`tests/benches/density.rs`) starts N of these, each on its own CRD, to compare their
//! memory with one reconcile-host running N plugins.
//!
//! `density-kube-controller GROUP VERSION KIND PLURAL EXPECT`: the API server comes from
//! `KUBECONFIG` (or in-cluster). Prints `synced <count>` on stdout once `EXPECT` objects have been
//! reconciled, then keeps running (watching) until killed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt as _};
use parking_lot::Mutex;

/// What the reconciler counts: the distinct objects reconciled so far, until `expect`.
struct Seen {
    names: Mutex<HashSet<String>>,
    expect: usize,
    announced: AtomicBool,
}

/// The reconciler never fails.
#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

async fn reconcile(object: Arc<DynamicObject>, seen: Arc<Seen>) -> Result<Action, Never> {
    let count = {
        let mut names = seen.names.lock();
        if names.len() < seen.expect {
            names.insert(object.name_any());
        }
        names.len()
    };
    if count >= seen.expect && !seen.announced.swap(true, Ordering::Relaxed) {
        println!("synced {count}");
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<DynamicObject>, _: &Never, _: Arc<Seen>) -> Action {
    Action::await_change()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [group, version, kind, plural, expect] = args.as_slice() else {
        eprintln!(
            "density-kube-controller: expected 5 arguments, got {}; usage: \
             density-kube-controller GROUP VERSION KIND PLURAL EXPECT",
            args.len()
        );
        return std::process::ExitCode::from(2);
    };
    let Ok(expect) = expect.parse::<usize>() else {
        eprintln!("density-kube-controller: EXPECT `{expect}` is not a count; pass e.g. 100");
        return std::process::ExitCode::from(2);
    };
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            eprintln!(
                "density-kube-controller: cannot build a client from KUBECONFIG: {error}; set \
                 KUBECONFIG to a kubeconfig file"
            );
            return std::process::ExitCode::FAILURE;
        }
    };
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let seen = Arc::new(Seen {
        names: Mutex::new(HashSet::new()),
        expect,
        announced: AtomicBool::new(false),
    });
    Controller::new_with(api, watcher::Config::default(), resource)
        .run(reconcile, error_policy, seen)
        .for_each(|_| futures::future::ready(()))
        .await;
    std::process::ExitCode::SUCCESS
}
