//! The controllers compared: controller-runtime's `website-controller` (Go, built from
//! `benches/peers`) and `reconcile-host` running the website example compiled from Rust, Go or
//! JavaScript. Each runs as its own process, whose CPU and memory are read from `/proc` and whose
//! reconciles are counted from its metrics (both expose `controller_runtime_reconcile_total`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::host::{
    Host, component, free_port, go_peer, http_get, manifest, scripted_component,
};

/// One side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    ControllerRuntime,
    Rust,
    Go,
    JavaScript,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::ControllerRuntime => "controller-runtime",
            Side::Rust => "host+rust",
            Side::Go => "host+go",
            Side::JavaScript => "host+js",
        }
    }

    /// `SIDES=cr,rust,go,js` (the default), in that order.
    pub fn parse(name: &str) -> Self {
        match name.trim() {
            "cr" | "controller-runtime" => Side::ControllerRuntime,
            "rust" => Side::Rust,
            "go" => Side::Go,
            "js" | "javascript" => Side::JavaScript,
            other => panic!(
                "website_peers: SIDES names `{other}`, which is no side; give a comma-separated \
                 list of cr, rust, go and js"
            ),
        }
    }
}

/// The kind and grants of the Rust example, which the ports (written for their own groups) are
/// given so that every side reconciles the same Websites.
const FOR: &str = "{apiVersion: example.com/v1, kind: Website}";
const GRANTS: &str = "[{apiVersion: apps/v1, kind: Deployment, verbs: [patch]}, {apiVersion: v1, \
                      kind: Service, verbs: [patch]}, {apiVersion: example.com/v1, kind: Website, \
                      verbs: [patch], subresources: [status]}]";

/// The component and manifest of the website example in one language, renamed `website` so
/// that every side applies with the same field manager.
fn host_plugin(side: Side, dir: &Path) -> PathBuf {
    let (example, module) = match side {
        Side::Rust => ("examples/website/plugin.yaml", component("website")),
        Side::Go => (
            "examples/website-go/plugin.yaml",
            scripted_component("examples/website-go/build.sh", "website-go"),
        ),
        Side::JavaScript => (
            "examples/website-js/plugin.yaml",
            scripted_component("examples/website-js/build.sh", "website-js"),
        ),
        Side::ControllerRuntime => unreachable!("controller-runtime runs no plugin"),
    };
    manifest(
        dir,
        example,
        &module,
        &[("name", "website"), ("for", FOR), ("grants", GRANTS)],
    )
}

/// Builds what `side` needs before any side runs (so no build shares the CPU with a
/// measurement).
pub fn prepare(side: Side, dir: &Path) {
    match side {
        Side::ControllerRuntime => {
            go_peer("website-controller");
        }
        _ => {
            host_plugin(side, dir);
        }
    }
}

/// A running side.
pub enum Running {
    Host(Host),
    Go {
        child: Child,
        metrics: String,
        log: PathBuf,
    },
}

impl Running {
    /// Starts `side` against the API server of `kubeconfig`, with `recheck` for
    /// controller-runtime (the examples' own is 60 s).
    pub fn start(side: Side, kubeconfig: &Path, dir: &Path, recheck: Duration) -> Self {
        if side != Side::ControllerRuntime {
            let plugin = host_plugin(side, dir);
            return Running::Host(Host::spawn(Host::bench_command(kubeconfig, &plugin)));
        }
        let metrics = format!("127.0.0.1:{}", free_port());
        let log = dir.join("website-controller.log");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(go_peer("website-controller"))
            .args(["--metrics-bind-address", &metrics])
            .arg(format!("--recheck={}s", recheck.as_secs()))
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("website-controller starts");
        Running::Go {
            child,
            metrics,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        match self {
            Running::Host(host) => host.pid(),
            Running::Go { child, .. } => child.id(),
        }
    }

    /// Reconciles so far, whatever their result.
    pub async fn reconciles(&self) -> f64 {
        let text = match self {
            Running::Host(host) => host.get("/metrics").await,
            Running::Go { metrics, .. } => http_get(metrics, "/metrics").await.unwrap_or_default(),
        };
        text.lines()
            .filter(|line| {
                line.starts_with("controller_runtime_reconcile_total{")
                    && line.contains("controller=\"website\"")
            })
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    /// For a host side, its own counters of where a plugin's time went, in seconds so far:
    /// running guest code, creating instances, host work inside imports (wall time summed over
    /// the workers; `reconcile_host_plugin_*_seconds_total`).
    pub async fn plugin_seconds(&self) -> Option<[f64; 3]> {
        let Running::Host(host) = self else {
            return None;
        };
        let text = host.get("/metrics").await;
        let sum = |family: &str| -> f64 {
            text.lines()
                .filter(|line| line.starts_with(family) && line.contains("plugin=\"website\""))
                .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum()
        };
        Some([
            sum("reconcile_host_plugin_guest_seconds_total{"),
            sum("reconcile_host_plugin_instantiate_seconds_total{"),
            sum("reconcile_host_plugin_import_seconds_total{"),
        ])
    }

    pub fn running(&mut self) -> bool {
        match self {
            Running::Host(host) => host.running(),
            Running::Go { child, .. } => child.try_wait().ok().flatten().is_none(),
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let log = match self {
            Running::Host(host) => host.log(),
            Running::Go { log, .. } => std::fs::read_to_string(log).unwrap_or_default(),
        };
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Go { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
