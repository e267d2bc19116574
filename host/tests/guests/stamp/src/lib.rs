//! Test guest for hot-reload tests: logs `stamp <namespace>/<name> rv=<resourceVersion>` for each
//! object it reconciles (`rv=gone` for a deleted one) and answers done, so a test can tell which
//! object versions this module saw.

use reconcile_guest::{Action, Error, Reconciler, Request, info};

struct Stamp;

impl Reconciler for Stamp {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let version = match request.object::<serde_json::Value>()? {
            Some(object) => object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("none")
                .to_owned(),
            None => "gone".to_owned(),
        };
        let namespace = request.namespace().unwrap_or_default();
        info!("stamp {namespace}/{} rv={version}", request.name());
        Ok(Action::done())
    }
}

reconcile_guest::export_reconciler!(Stamp);
