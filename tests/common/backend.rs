//! The API server a test runs against, chosen by one switch: `E2E_BACKEND=embedded` (the
//! default: a fresh embedded API server per test) or `E2E_BACKEND=real` (kube-apiserver and etcd
//! from [`control_plane`](super::control_plane), started once per test binary).
//!
//! On the real backend the control planes are shared by the tests of one binary: a [`Backend`]
//! holds a lease on one of [`planes`] control planes (`E2E_REAL_PLANES`, two by default, each
//! started on first use), so tests run against them one at a time per plane, and each lease
//! starts by removing what earlier tests left (objects in every namespace but the system ones,
//! extra namespaces, CustomResourceDefinitions): a test sees a cluster as fresh as an embedded
//! server. Tests that need the embedded server's in-process handles (fault injection, the request
//! log) use [`Backend::embedded`] and stay embedded-only.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use embedded_apiserver::{ApiServer, Config, StartError};

use super::control_plane::ControlPlane;

/// Which API server the tests run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The embedded API server, one per test.
    Embedded,
    /// Real kube-apiserver and etcd processes, shared by the tests of a binary.
    Real,
}

/// The backend `E2E_BACKEND` selects (`embedded` when unset).
///
/// # Panics
/// On any other value, naming the ones accepted.
pub fn kind() -> Kind {
    match std::env::var("E2E_BACKEND").as_deref() {
        Err(_) | Ok("" | "embedded") => Kind::Embedded,
        Ok("real") => Kind::Real,
        Ok(other) => panic!("E2E_BACKEND={other} is not a backend; use `embedded` or `real`"),
    }
}

/// True when the tests run against a real API server.
pub fn real() -> bool {
    kind() == Kind::Real
}

/// The API server of one test.
pub enum Backend {
    /// A fresh embedded API server.
    Embedded(ApiServer),
    /// One of the binary's shared control planes, leased to this test until dropped.
    Real {
        /// The control plane.
        plane: &'static ControlPlane,
        /// Held while the test runs: the tests of a binary take turns on each plane.
        _lease: Lease,
    },
}

impl Backend {
    /// The backend `E2E_BACKEND` selects, for one test; the same call as
    /// [`ApiServer::start`], so a test file switches with its `use` line. `config` configures the
    /// embedded server; the real one ignores it (it always requires its admin token).
    ///
    /// # Errors
    /// The embedded server's start-up error (the real one panics, naming its log).
    pub async fn start(config: Config) -> Result<Self, StartError> {
        match kind() {
            Kind::Embedded => ApiServer::start(config).await.map(Self::Embedded),
            Kind::Real => {
                let lease = Lease::acquire().await;
                let slot = lease.slot;
                let plane = tokio::task::spawn_blocking(move || {
                    let plane = shared(slot);
                    reset(plane);
                    plane
                })
                .await
                .expect("the control plane starts");
                Ok(Self::Real {
                    plane,
                    _lease: lease,
                })
            }
        }
    }

    /// An embedded server whatever the switch says, for tests that need its in-process handles.
    pub async fn embedded(config: Config) -> Self {
        Self::Embedded(
            ApiServer::start(config)
                .await
                .expect("the embedded API server starts"),
        )
    }

    /// True for the real control plane.
    pub fn is_real(&self) -> bool {
        matches!(self, Self::Real { .. })
    }

    /// The embedded server, when this is one.
    pub fn server(&self) -> Option<&ApiServer> {
        match self {
            Self::Embedded(server) => Some(server),
            Self::Real { .. } => None,
        }
    }

    /// The real control plane, when this is one.
    pub fn control_plane(&self) -> Option<&'static ControlPlane> {
        match self {
            Self::Embedded(_) => None,
            Self::Real { plane, .. } => Some(plane),
        }
    }

    /// Makes the server answer nothing (requests hang) until [`resume`](Self::resume): the
    /// embedded one pauses, kube-apiserver gets SIGSTOP.
    pub fn pause(&self) {
        match self {
            Self::Embedded(server) => server.faults().pause(),
            Self::Real { plane, .. } => plane.signal_apiserver("STOP"),
        }
    }

    /// Answers again after [`pause`](Self::pause).
    pub fn resume(&self) {
        match self {
            Self::Embedded(server) => server.faults().resume(),
            Self::Real { plane, .. } => plane.signal_apiserver("CONT"),
        }
    }

    /// The API server comes back without its state, on the same address with the same
    /// certificate and credentials: the embedded one starts again over an empty store, the real
    /// one gets an empty etcd ([`ControlPlane::wipe_and_restart`]).
    pub async fn wipe_and_restart(self) -> Self {
        match self {
            Self::Embedded(server) => Self::Embedded(
                server
                    .restart_empty()
                    .await
                    .expect("the embedded API server starts again on its address"),
            ),
            Self::Real { plane, _lease } => {
                tokio::task::spawn_blocking(move || plane.wipe_and_restart())
                    .await
                    .expect("the control plane comes back");
                Self::Real { plane, _lease }
            }
        }
    }

    /// The URL a kubeconfig points at (HTTPS on the real server).
    pub fn url(&self) -> String {
        match self {
            Self::Embedded(server) => server.https_url().unwrap_or_else(|| server.url()),
            Self::Real { plane, .. } => plane.url().to_owned(),
        }
    }

    /// An admin kube client. Call it inside the test's runtime (kube spawns a task).
    ///
    /// # Errors
    /// When kube refuses the configuration (the embedded server's error; the real one panics).
    pub fn kube_client(&self) -> Result<kube::Client, embedded_apiserver::ClientError> {
        match self {
            Self::Embedded(server) => server.kube_client(),
            Self::Real { plane, .. } => Ok(plane.kube_client()),
        }
    }

    /// An admin kube client impersonating `user`. Call it inside the test's runtime.
    pub fn kube_client_as(&self, user: &str) -> kube::Client {
        match self {
            Self::Embedded(server) => server
                .kube_client_as(user)
                .expect("a kube client for the embedded API server"),
            Self::Real { plane, .. } => plane.kube_client_as(Some(user)),
        }
    }

    /// Writes an admin kubeconfig to `path`.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), String> {
        match self {
            Self::Embedded(server) => server.write_kubeconfig(path).map_err(|e| e.to_string()),
            Self::Real { plane, .. } => plane.write_kubeconfig(path).map_err(|e| e.to_string()),
        }
    }

    /// Runs `kubectl` (as [`kubectl`](Self::kubectl)) with `args`; its stdout, trimmed,
    /// asserting success.
    pub fn kubectl_ok(&self, dir: &Path, args: &[&str]) -> String {
        let output = self.kubectl(dir).args(args).output().expect("kubectl runs");
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// `kubectl` configured for this server (an admin kubeconfig written into `dir`).
    pub fn kubectl(&self, dir: &Path) -> Command {
        let kubeconfig = dir.join("kubectl.kubeconfig");
        self.write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        let mut command = Command::new("kubectl");
        command.arg("--kubeconfig").arg(kubeconfig);
        command
    }
}

/// What the harness needs of an API server: an admin client and a kubeconfig. Both the embedded
/// server and a [`Backend`] have them, so hosts start on either.
pub trait Cluster {
    /// An admin kube client (call it inside the test's runtime).
    fn client(&self) -> kube::Client;
    /// Writes an admin kubeconfig to `path`.
    fn kubeconfig_to(&self, path: &Path);
}

impl Cluster for ApiServer {
    fn client(&self) -> kube::Client {
        self.kube_client()
            .expect("a kube client for the embedded API server")
    }
    fn kubeconfig_to(&self, path: &Path) {
        self.write_kubeconfig(path).expect("kubeconfig written");
    }
}

impl Cluster for Backend {
    fn client(&self) -> kube::Client {
        self.kube_client()
            .expect("a kube client for the API server")
    }
    fn kubeconfig_to(&self, path: &Path) {
        self.write_kubeconfig(path).expect("kubeconfig written");
    }
}

/// How many control planes the tests of a binary share on the real backend: `E2E_REAL_PLANES`,
/// 2 when unset. Each plane serves one test at a time, so this is also how many real-backend
/// tests run at once.
///
/// # Panics
/// When `E2E_REAL_PLANES` is not a positive number.
pub fn planes() -> usize {
    static PLANES: OnceLock<usize> = OnceLock::new();
    *PLANES.get_or_init(|| match std::env::var("E2E_REAL_PLANES") {
        Err(_) => 2,
        Ok(value) => match value.parse() {
            Ok(planes) if planes > 0 => planes,
            _ => panic!("E2E_REAL_PLANES={value} is not a number of control planes; use 1 or more"),
        },
    })
}

/// A test's turn on one of the [`planes`]: the plane's number while held; dropping it hands the
/// plane to the next test waiting.
pub struct Lease {
    slot: usize,
    _turn: tokio::sync::SemaphorePermit<'static>,
}

impl Lease {
    /// Waits for a free plane.
    async fn acquire() -> Self {
        static TURNS: OnceLock<tokio::sync::Semaphore> = OnceLock::new();
        let turn = TURNS
            .get_or_init(|| tokio::sync::Semaphore::new(planes()))
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let slot = free_planes()
            .lock()
            .pop()
            .expect("a turn leaves a plane free");
        Self { slot, _turn: turn }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // The plane is free again before the turn (the field, dropped after this) is.
        free_planes().lock().push(self.slot);
    }
}

/// The planes no test holds, lowest number last (so one test alone always uses plane 0).
fn free_planes() -> &'static parking_lot::Mutex<Vec<usize>> {
    static FREE: OnceLock<parking_lot::Mutex<Vec<usize>>> = OnceLock::new();
    FREE.get_or_init(|| parking_lot::Mutex::new((0..planes()).rev().collect()))
}

/// The binary's control plane number `slot`, started on first use; stopped by its watchdog when
/// the test process exits (a `static` is never dropped).
pub fn shared(slot: usize) -> &'static ControlPlane {
    static PLANES: OnceLock<Vec<OnceLock<ControlPlane>>> = OnceLock::new();
    PLANES.get_or_init(|| (0..planes()).map(|_| OnceLock::new()).collect())[slot]
        .get_or_init(ControlPlane::start)
}

/// Namespaces a real server makes itself; kept by [`reset`].
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The namespaced kinds tests write, removed by [`reset`].
const KINDS: &str = "configmaps,secrets,services,serviceaccounts,pods,deployments.apps,\
                     leases.coordination.k8s.io,roles.rbac.authorization.k8s.io,\
                     rolebindings.rbac.authorization.k8s.io,events";

/// Removes what earlier tests left: every CRD (its objects go with it), the objects of
/// [`KINDS`] outside `kube-system` (finalizers cleared first: the hosts that would remove them
/// are gone), cluster roles and bindings not made by the server, and every namespace it did not
/// make (finalised by hand: there is no namespace controller). `default`'s ServiceAccount and the
/// `kubernetes` Service stay.
pub fn reset(plane: &ControlPlane) {
    let kubectl = |args: &[&str]| -> String {
        let output = plane.kubectl().args(args).output().expect("kubectl runs");
        assert!(
            output.status.success(),
            "kubectl {args:?} (resetting the shared control plane) failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let namespaces: Vec<String> = kubectl(&["get", "namespaces", "-o", "name"])
        .lines()
        .filter_map(|line| line.strip_prefix("namespace/"))
        .filter(|name| *name != "kube-system")
        .map(str::to_owned)
        .collect();
    // Finalizers first, on every object that has one.
    let kinds = format!("{KINDS},customresourcedefinitions.apiextensions.k8s.io");
    let listed = kubectl(&["get", &kinds, "-A", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&listed).expect("kubectl prints JSON");
    for item in list["items"].as_array().into_iter().flatten() {
        let has_finalizers = item["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if !has_finalizers {
            continue;
        }
        let kind = item["kind"].as_str().unwrap_or_default();
        let api_version = item["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.split_once('/').map_or("", |(group, _)| group);
        let resource = if group.is_empty() {
            kind.to_lowercase()
        } else {
            format!("{}.{group}", kind.to_lowercase())
        };
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        let mut args = vec!["patch", &resource, name, "--type=merge"];
        let namespace = item["metadata"]["namespace"].as_str();
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        args.extend(["-p", r#"{"metadata":{"finalizers":null}}"#]);
        let _ = plane.kubectl().args(&args).output();
    }
    // Custom resources: their finalizers too, then the CRDs (their objects go with them).
    let crds = kubectl(&["get", "customresourcedefinitions", "-o", "name"]);
    for crd in crds.lines() {
        let resource = crd.trim_start_matches("customresourcedefinition.apiextensions.k8s.io/");
        let objects = kubectl(&["get", resource, "-A", "-o", "json"]);
        let list: serde_json::Value = serde_json::from_str(&objects).expect("kubectl prints JSON");
        for item in list["items"].as_array().into_iter().flatten() {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let mut args = vec!["patch", resource, name, "--type=merge"];
            if let Some(namespace) = item["metadata"]["namespace"].as_str() {
                args.extend(["-n", namespace]);
            }
            args.extend(["-p", r#"{"metadata":{"finalizers":null}}"#]);
            let _ = plane.kubectl().args(&args).output();
        }
    }
    if !crds.trim().is_empty() {
        kubectl(&[
            "delete",
            "customresourcedefinitions",
            "--all",
            "--wait=true",
        ]);
    }
    for namespace in &namespaces {
        kubectl(&[
            "delete",
            KINDS,
            "-n",
            namespace,
            "--field-selector",
            "metadata.name!=default,metadata.name!=kubernetes",
            "--wait=false",
            "--ignore-not-found",
        ]);
    }
    // Cluster-wide RBAC the tests made (the server's own is labelled bootstrapping).
    kubectl(&[
        "delete",
        "clusterroles.rbac.authorization.k8s.io,clusterrolebindings.rbac.authorization.k8s.io",
        "-l",
        "kubernetes.io/bootstrapping!=rbac-defaults",
        "--wait=false",
        "--ignore-not-found",
    ]);
    // Admission policies the tests applied (the server makes none).
    kubectl(&[
        "delete",
        "validatingadmissionpolicies.admissionregistration.k8s.io,\
         validatingadmissionpolicybindings.admissionregistration.k8s.io",
        "--all",
        "--wait=false",
        "--ignore-not-found",
    ]);
    for namespace in namespaces
        .iter()
        .filter(|n| !SYSTEM_NAMESPACES.contains(&n.as_str()))
    {
        kubectl(&[
            "delete",
            "namespace",
            namespace,
            "--wait=false",
            "--ignore-not-found",
        ]);
        // No namespace controller: empty its finalizers through the finalize subresource.
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{namespace}"}},"spec":{{"finalizers":[]}}}}"#
        );
        let mut finalize = plane.kubectl();
        finalize
            .args(["replace", "--raw"])
            .arg(format!("/api/v1/namespaces/{namespace}/finalize"))
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = finalize.spawn().expect("kubectl runs");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin piped");
            let _ = stdin.write_all(body.as_bytes());
        }
        let _ = child.wait();
    }
}
