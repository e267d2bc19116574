//! The twin comparison every port of the Rust website example passes: the port and the Rust
//! website side by side in one host on the same spec (the same status and children at each
//! generation, the same requeue decision, no guest failure, children collected with their
//! Website), and `reconcile-host reconcile` making the same calls for the same object.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::backend::Backend as ApiServer;
use super::host::{Host, component, manifest, scratch, workspace};
use super::website::{
    children, crd, normalized_calls, reconcile_host, reconcile_json, sample_website, status_at,
    websites,
};
use super::{collected, eventually_async, namespace};

/// The directory and plugin of the Rust website, which every port is compared with.
const RUST: &str = "examples/website";

/// A port of the website example to another language.
pub struct Port {
    /// Its example directory, e.g. `examples/website-go`.
    pub example: &'static str,
    /// Its language's short name (`go`): the namespace of its Websites in the side-by-side run,
    /// its API group (`go.example.com`) and its sample's name (`hello-go`).
    pub language: &'static str,
    /// Its built component.
    pub component: PathBuf,
}

impl Port {
    /// The port in `examples/website-<language>`, built to `component`.
    pub fn new(language: &'static str, example: &'static str, component: PathBuf) -> Self {
        Self {
            example,
            language,
            component,
        }
    }

    /// Its plugin name, as in its manifest: the example directory's name.
    fn plugin(&self) -> &'static str {
        self.example.rsplit('/').next().unwrap_or(self.example)
    }

    /// Its Websites' API group.
    pub fn group(&self) -> String {
        format!("{}.example.com", self.language)
    }
}

/// Runs `port` and the Rust website in one host on the same spec and asserts they agree at
/// every step; `after_first` runs once both have reconciled the first generation, for what only
/// this port shows.
pub async fn same_children_and_status_as_the_rust_website(
    server: &ApiServer,
    port: &Port,
    after_first: impl AsyncFnOnce(&Host),
) {
    let plugin = port.plugin();
    let lang = port.language;
    let group = port.group();
    let dir = scratch(&format!("{lang}-twins"));
    crd(server, RUST).await;
    crd(server, port.example).await;
    for ns in ["rust", lang] {
        namespace(server, ns, &[]).await;
    }
    let plugins = [
        manifest(
            &dir,
            &format!("{RUST}/plugin.yaml"),
            &component("website"),
            &[],
        ),
        manifest(
            &dir,
            &format!("{}/plugin.yaml", port.example),
            &port.component,
            &[],
        ),
    ];
    let host = Host::start(server, &dir, &plugins);

    // The same spec as a Rust Website and as one of the port, side by side.
    let rust = websites(server, "example.com", "rust");
    let twin = websites(server, &group, lang);
    rust.create(
        &PostParams::default(),
        &sample_website(port.example, "twin", "rust", "example.com"),
    )
    .await
    .expect("rust website created");
    twin.create(
        &PostParams::default(),
        &sample_website(port.example, "twin", lang, &group),
    )
    .await
    .unwrap_or_else(|error| panic!("{lang} website created: {error}"));

    let twin_status = status_at(&twin, "twin", 1).await;
    assert_eq!(twin_status, status_at(&rust, "twin", 1).await);
    assert_eq!(
        twin_status,
        json!({"observedGeneration": 1, "image": "nginx:1.27", "replicas": 2,
               "deployment": "twin", "service": "twin"})
    );
    let twin_children = children(server, lang, "twin").await;
    assert_eq!(twin_children, children(server, "rust", "twin").await);
    assert_eq!(twin_children["deployment"]["spec"]["replicas"], 2);
    assert_eq!(
        twin_children["deployment"]["ownerReferences"],
        json!([{"kind": "Website", "name": "twin", "controller": true, "blockOwnerDeletion": true}])
    );
    // Its answer is a requeue decision: look again in 60 s.
    host.wait_metric(
        &format!(
            "controller_runtime_reconcile_total{{controller=\"{plugin}\",result=\"requeue_after\"}}"
        ),
        1.0,
    )
    .await;
    after_first(&host).await;

    // A spec change reaches both the same way.
    let patch = json!({"spec": {"image": "nginx:1.28", "replicas": 3}});
    for websites in [&rust, &twin] {
        websites
            .patch("twin", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patched");
    }
    let twin_status = status_at(&twin, "twin", 2).await;
    assert_eq!(twin_status, status_at(&rust, "twin", 2).await);
    assert_eq!(
        (&twin_status["image"], &twin_status["replicas"]),
        (&json!("nginx:1.28"), &json!(3))
    );
    let updated = eventually_async("both Deployments at 3 replicas", || async {
        let twin_children = children(server, lang, "twin").await;
        let rust_children = children(server, "rust", "twin").await;
        (twin_children["deployment"]["spec"]["replicas"] == 3
            && rust_children["deployment"]["spec"]["replicas"] == 3)
            .then_some((twin_children, rust_children))
    })
    .await;
    assert_eq!(updated.0, updated.1);
    assert_eq!(
        updated.0["deployment"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    for reason in ["trap", "deadline", "memory", "instantiate"] {
        let series = format!(
            "reconcile_host_plugin_failures_total{{plugin=\"{plugin}\",reason=\"{reason}\"}}"
        );
        assert_eq!(
            host.metric(&series).await,
            0.0,
            "{series}; log:\n{}",
            host.log()
        );
    }

    // Deleting the Website takes its children with it (garbage collection; see `collected`).
    let uid = twin
        .get("twin")
        .await
        .expect("the Website")
        .metadata
        .uid
        .expect("a uid");
    twin.delete("twin", &DeleteParams::default())
        .await
        .expect("deleted");
    let client = server.kube_client().expect("client");
    let real = server.is_real();
    collected(
        real,
        &Api::<Deployment>::namespaced(client.clone(), lang),
        "twin",
        &uid,
    )
    .await;
    collected(
        real,
        &Api::<Service>::namespaced(client, lang),
        "twin",
        &uid,
    )
    .await;
}

/// `reconcile-host check` accepts the port, and `reconcile-host reconcile` on its sample makes
/// the calls the Rust website makes on the same object (names and group aside) and answers the
/// same requeue decision. Returns the port's run, for what only this port shows.
pub fn same_calls_as_the_rust_website(port: &Port) -> Value {
    let plugin = port.plugin();
    let lang = port.language;
    let group = port.group();
    let dir = scratch(&format!("{lang}-cli"));
    let twin = manifest(
        &dir,
        &format!("{}/plugin.yaml", port.example),
        &port.component,
        &[],
    );
    let rust = manifest(
        &dir,
        &format!("{RUST}/plugin.yaml"),
        &component("website"),
        &[],
    );
    let twin_object = workspace().join(port.example).join("samples/website.yaml");
    let check = reconcile_host(&[
        "check",
        twin.to_str().expect("UTF-8"),
        "--sample",
        twin_object.to_str().expect("UTF-8"),
    ]);
    let printed = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{printed}");
    assert!(
        printed.contains(&format!("ok: plugin `{plugin}` is valid")),
        "{printed}"
    );

    let rust_object = dir.join("rust-website.yaml");
    let sample = format!("hello-{lang}");
    let text = std::fs::read_to_string(&twin_object).expect("sample");
    std::fs::write(
        &rust_object,
        text.replace(&group, "example.com")
            .replace(&sample, "hello"),
    )
    .expect("written");
    let twin_run = reconcile_json(&twin, &twin_object);
    let rust_run = reconcile_json(&rust, &rust_object);
    assert_eq!(
        twin_run["action"],
        json!({"type": "requeue-after", "afterMs": 60000}),
        "{twin_run}"
    );
    assert_eq!(twin_run["action"], rust_run["action"]);
    assert_eq!(twin_run["denied"], json!([]));
    let rust_calls = normalized_calls(
        &rust_run,
        &[
            ("\"hello\"", &format!("\"{sample}\"")),
            ("example.com", &group),
        ],
    );
    assert_eq!(normalized_calls(&twin_run, &[]), rust_calls);
    twin_run
}
