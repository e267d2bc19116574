//! The admission policy shipped in `deploy/base/plugin-admission.yaml`, on kube-apiserver: a
//! user may create or update a `ReconcilerPlugin` only with grants they hold themselves (an
//! update only for what it adds), and acting as a ServiceAccount they may act as themselves
//! (`impersonate` on it), unless they may `escalate` on plugin objects. The user is a
//! ServiceAccount whose RBAC the server enforces; the embedded server neither authorizes nor
//! runs admission policies, so there the test says so and stops.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common::backend::Backend;
use crate::common::control_plane::ControlPlane;
use crate::common::host::workspace;
use crate::common::{crd_established, eventually_async, namespace};
use embedded_apiserver::Config;

/// The user's namespace, where they may get, list and patch ConfigMaps.
const OWN: &str = "team-a";
/// A namespace where they may do nothing.
const OTHER: &str = "team-b";
/// The policy's and the binding's name.
const POLICY: &str = "reconcile-host-plugin-grants";
/// Subresources of ConfigMaps the user holds (RBAC has no `configmaps/*`).
const SUBRESOURCES: [&str; 9] = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"];
/// What every refusal of a grant says.
const NOT_HELD: &str = "is a right you do not hold";

/// `command` with `stdin` as its input.
fn run(command: &mut Command, stdin: Option<&Value>) -> Output {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("kubectl runs");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(value) = stdin {
        input
            .write_all(value.to_string().as_bytes())
            .expect("stdin written");
    }
    drop(input);
    child.wait_with_output().expect("kubectl finishes")
}

/// Runs `command`, asserting success.
fn ok(command: &mut Command, stdin: Option<&Value>) {
    let output = run(command, stdin);
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The user: a ServiceAccount allowed get, list and patch on ConfigMaps (and their
/// [`SUBRESOURCES`]) in `team-a`, to act as the ServiceAccounts `default` and `site` there, and
/// create, update, patch and get on plugin objects.
struct User {
    plane: &'static ControlPlane,
    token: String,
}

impl User {
    fn new(plane: &'static ControlPlane) -> Self {
        let resources: Vec<String> = std::iter::once("configmaps".to_owned())
            .chain(SUBRESOURCES.map(|s| format!("configmaps/{s}")))
            .collect();
        let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "configmaps", "namespace": OWN},
             "rules": [{"apiGroups": [""], "resources": resources,
                        "verbs": ["get", "list", "patch"]},
                       {"apiGroups": [""], "resources": ["serviceaccounts"],
                        "verbs": ["impersonate"], "resourceNames": ["default", "site"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "alice-configmaps", "namespace": OWN},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": "configmaps"},
             "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": OWN}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "plugin-author"},
             "rules": [{"apiGroups": ["reconcile-host.dev"],
                        "resources": ["reconcilerplugins", "namespacedreconcilerplugins"],
                        "verbs": ["get", "create", "update", "patch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "alice-plugin-author"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "plugin-author"},
             "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": OWN}]}]});
        ok(plane.kubectl().args(["apply", "-f", "-"]), Some(&rbac));
        Self {
            plane,
            token: plane.service_account_token(OWN, "alice"),
        }
    }

    /// `kubectl` as this user.
    fn kubectl(&self) -> Command {
        let mut command = Command::new("kubectl");
        command
            .args(["--server", self.plane.url(), "--token", &self.token])
            .arg("--certificate-authority")
            .arg(self.plane.ca_path());
        command
    }

    /// Creates `object` (`dry_run`: only as far as admission), returning the refusal's text.
    fn create(&self, object: &Value, dry_run: bool) -> Result<(), String> {
        let mut command = self.kubectl();
        command.args(["create", "-f", "-"]);
        if dry_run {
            command.arg("--dry-run=server");
        }
        outcome(&run(&mut command, Some(object)))
    }

    /// Merge-patches the plugin object `name` with `patch`, returning the refusal's text.
    fn patch(&self, name: &str, patch: &Value) -> Result<(), String> {
        let output = run(
            self.kubectl()
                .args(["patch", "reconcilerplugin", name, "--type=merge", "-p"])
                .arg(patch.to_string()),
            None,
        );
        outcome(&output)
    }
}

fn outcome(output: &Output) -> Result<(), String> {
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// A plugin object `name` with `grants`.
fn plugin(name: &str, grants: Value) -> Value {
    json!({"apiVersion": "reconcile-host.dev/v1alpha1", "kind": "ReconcilerPlugin",
           "metadata": {"name": name},
           "spec": {"oci": "registry.example.com/plugins/p:v1",
                    "for": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "grants": grants}})
}

/// A grant of `verbs` on ConfigMaps in `namespaces` (`None`: every namespace).
fn config_maps(verbs: &[&str], namespaces: Option<&[&str]>) -> Value {
    let mut grant = json!({"apiVersion": "v1", "kind": "ConfigMap", "verbs": verbs});
    if let Some(namespaces) = namespaces {
        grant["namespaces"] = json!(namespaces);
    }
    grant
}

/// Asserts `result` is the policy's refusal and its message contains each of `parts`.
fn refused(what: &str, result: Result<(), String>, parts: &[&str]) {
    let Err(message) = result else {
        panic!("{what} was admitted");
    };
    let by_policy = format!("ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied");
    assert!(
        message.contains(&by_policy),
        "{what}: not the policy's refusal: {message}"
    );
    for part in parts {
        assert!(
            message.contains(part),
            "{what}: `{part}` missing from: {message}"
        );
    }
}

fn admitted(what: &str, result: Result<(), String>) {
    if let Err(message) = result {
        panic!("{what} was refused: {message}");
    }
}

/// Applies the deployed file at `path` (relative to the workspace) as the admin.
fn apply_deployed(plane: &ControlPlane, path: &str) {
    let file = workspace().join(path);
    ok(
        plane.kubectl().args(["apply", "-f"]).arg(Path::new(&file)),
        None,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_object_is_admitted_only_with_grants_its_requester_holds() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let Some(plane) = backend.control_plane() else {
        eprintln!(
            "the embedded API server neither authorizes requests nor runs admission policies; \
             run with E2E_BACKEND=real"
        );
        return;
    };
    let client = backend.kube_client().expect("client");
    apply_deployed(plane, "deploy/base/reconcilerplugins-crd.yaml");
    crd_established(&client, "reconcilerplugins.reconcile-host.dev").await;
    crd_established(&client, "namespacedreconcilerplugins.reconcile-host.dev").await;
    apply_deployed(plane, "deploy/base/plugin-admission.yaml");
    namespace(&backend, OWN, &[]).await;
    namespace(&backend, OTHER, &[]).await;
    let alice = User::new(plane);

    // A new policy (and new RBAC) takes a moment to be enforced: wait until a probe is refused
    // by the policy and a grant within alice's rights is admitted, both as server-side dry runs.
    let within = plugin("own", json!([config_maps(&["get", "patch"], Some(&[OWN]))]));
    let probe = plugin(
        "probe",
        json!([{"apiVersion": "v1", "kind": "Secret", "verbs": ["get"]}]),
    );
    eventually_async(
        "the policy to refuse a probe and admit alice's own grants",
        || async {
            let refused = matches!(alice.create(&probe, true), Err(m) if m.contains(NOT_HELD));
            (refused && alice.create(&within, true).is_ok()).then_some(())
        },
    )
    .await;

    admitted(
        "a grant within alice's rights",
        alice.create(&within, false),
    );
    let cases = [
        (
            "ConfigMaps in another namespace",
            config_maps(&["get"], Some(&[OTHER])),
            vec![
                "ReconcilerPlugin `case`: its grant of `get` on v1 ConfigMap in namespace `team-b`",
                "(authorized as `get` on resource `configmaps` of group ``)",
                NOT_HELD,
                "verb `escalate` on reconcilerplugins",
            ],
        ),
        (
            "ConfigMaps cluster-wide",
            config_maps(&["get"], None),
            vec!["`get` on v1 ConfigMap cluster-wide", NOT_HELD],
        ),
        (
            "ConfigMaps in every namespace as [\"*\"]",
            config_maps(&["get"], Some(&["*"])),
            vec!["`get` on v1 ConfigMap cluster-wide", NOT_HELD],
        ),
        (
            "a verb alice lacks",
            config_maps(&["get", "delete"], Some(&[OWN])),
            vec!["`delete` on v1 ConfigMap in namespace `team-a`", NOT_HELD],
        ),
        (
            "Secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "verbs": ["get"], "namespaces": [OWN]}),
            vec![
                "`get` on v1 Secret in namespace `team-a`",
                "resource `secrets`",
                NOT_HELD,
            ],
        ),
        (
            "a grant's written resource, checked in place of the guess",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "verbs": ["get"], "namespaces": [OWN],
                   "resource": "secrets"}),
            vec![
                "`get` on v1 ConfigMap in namespace `team-a`",
                "resource `secrets`",
                NOT_HELD,
            ],
        ),
        (
            "Deployments' scale subresource",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "verbs": ["patch"],
                   "namespaces": [OWN], "subresources": ["scale"]}),
            vec![
                "`patch` on apps/v1 Deployment in namespace `team-a`",
                "group `apps`",
            ],
        ),
    ];
    for (what, grant, parts) in cases {
        refused(
            what,
            alice.create(&plugin("case", json!([grant])), false),
            &parts,
        );
    }

    // Twenty combinations alice holds (2 verbs × the object and 9 subresources) fit the CEL
    // budget; twenty-two are more than one request checks.
    let twenty = json!([{"apiVersion": "v1", "kind": "ConfigMap", "verbs": ["get", "patch"],
                         "namespaces": [OWN], "subresources": SUBRESOURCES}]);
    admitted(
        "twenty held combinations",
        alice.create(&plugin("twenty", twenty), true),
    );
    let many: Vec<String> = (0..11).map(|i| format!("ns-{i}")).collect();
    let many = json!([{"apiVersion": "v1", "kind": "ConfigMap", "verbs": ["get", "patch"],
                       "namespaces": many}]);
    refused(
        "twenty-two combinations",
        alice.create(&plugin("many", many), false),
        &["it adds 22 grant combinations", "checked for at most 20"],
    );

    // Updates: adding an out-of-reach grant is refused; what an object already gives is not
    // checked again.
    refused(
        "an update adding another namespace",
        alice.patch(
            "own",
            &json!({"spec": {"grants": [config_maps(&["get", "patch"], Some(&[OWN, OTHER]))]}}),
        ),
        &["ReconcilerPlugin `own`: its grant of `get` on v1 ConfigMap in namespace `team-b`"],
    );
    let wide = plugin(
        "wide",
        json!([{"apiVersion": "v1", "kind": "Secret", "verbs": ["get", "patch"]}]),
    );
    ok(plane.kubectl().args(["create", "-f", "-"]), Some(&wide));
    admitted(
        "an update of another field of an object with grants alice lacks",
        alice.patch("wide", &json!({"spec": {"concurrency": 3}})),
    );
    admitted(
        "an update narrowing grants alice lacks to one namespace",
        alice.patch(
            "wide",
            &json!({"spec": {"grants": [{"apiVersion": "v1", "kind": "Secret",
                                          "verbs": ["get"], "namespaces": [OTHER]}]}}),
        ),
    );
    refused(
        "an update widening them again",
        alice.patch(
            "wide",
            &json!({"spec": {"grants": [{"apiVersion": "v1", "kind": "Secret",
                                          "verbs": ["get"]}]}}),
        ),
        &["`get` on v1 Secret cluster-wide", NOT_HELD],
    );

    // A NamespacedReconcilerPlugin's grants without namespaces reach only its own namespace
    // (the host holds them there), so that is where they are checked.
    let namespaced = |namespace: &str| {
        let mut object = plugin("team", json!([config_maps(&["get", "patch"], None)]));
        object["kind"] = json!("NamespacedReconcilerPlugin");
        object["metadata"]["namespace"] = json!(namespace);
        object
    };
    admitted(
        "a namespaced plugin granting ConfigMaps in alice's namespace",
        alice.create(&namespaced(OWN), true),
    );
    refused(
        "a namespaced plugin granting ConfigMaps in another namespace",
        alice.create(&namespaced(OTHER), true),
        &[
            "NamespacedReconcilerPlugin `team`: its grant of `get` on v1 ConfigMap in namespace `team-b`",
            NOT_HELD,
        ],
    );

    // The account a plugin acts as: one alice may act as, or none, passes; another is refused,
    // on creation and when an update names it; an update leaving it alone is not checked.
    let acting_as = |name: &str, account: Option<(&str, &str)>| {
        let mut object = plugin(name, json!([config_maps(&["get"], Some(&[OWN]))]));
        if let Some((namespace, account)) = account {
            object["spec"]["serviceAccountName"] = json!(account);
            object["spec"]["serviceAccountNamespace"] = json!(namespace);
        }
        object
    };
    admitted(
        "a plugin acting as an account alice may act as",
        alice.create(&acting_as("as-site", Some((OWN, "site"))), false),
    );
    for (what, account) in [
        ("an account of another namespace", (OTHER, "robot")),
        ("another account of alice's namespace", (OWN, "admin-bot")),
    ] {
        let (namespace, name) = account;
        refused(
            what,
            alice.create(&acting_as("as-other", Some(account)), true),
            &[
                &format!(
                    "ReconcilerPlugin `as-other`: it acts as ServiceAccount {namespace}/{name}"
                ),
                "you may not act as it (verb `impersonate` on that serviceaccount",
            ],
        );
    }
    refused(
        "an update naming another account",
        alice.patch(
            "as-site",
            &json!({"spec": {"serviceAccountName": "robot", "serviceAccountNamespace": OTHER}}),
        ),
        &["it acts as ServiceAccount team-b/robot"],
    );
    ok(
        plane.kubectl().args(["create", "-f", "-"]),
        Some(&acting_as("as-robot", Some((OTHER, "robot")))),
    );
    admitted(
        "an update of another field of a plugin acting as an account alice may not act as",
        alice.patch("as-robot", &json!({"spec": {"concurrency": 2}})),
    );
    let mut namespaced_as = namespaced(OWN);
    namespaced_as["metadata"]["name"] = json!("team-admin");
    namespaced_as["spec"]["serviceAccountName"] = json!("admin-bot");
    refused(
        "a namespaced plugin acting as an account of its namespace alice may not act as",
        alice.create(&namespaced_as, true),
        &["NamespacedReconcilerPlugin `team-admin`: it acts as ServiceAccount team-a/admin-bot"],
    );

    // With the shipped `escalate` role bound, alice may give what she does not hold.
    let escalate = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "alice-escalate"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "reconcile-host-plugin-escalate"},
        "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": OWN}]});
    ok(plane.kubectl().args(["create", "-f", "-"]), Some(&escalate));
    let secrets = plugin(
        "secrets",
        json!([{"apiVersion": "v1", "kind": "Secret",
                                             "verbs": ["get", "delete"]}]),
    );
    eventually_async("alice's `escalate` to be enforced", || async {
        alice.create(&secrets, false).ok()
    })
    .await;
    admitted(
        "an update adding more with `escalate`",
        alice.patch(
            "own",
            &json!({"spec": {"grants": [config_maps(&["get", "patch"], Some(&[OWN, OTHER]))]}}),
        ),
    );
}

/// The policy checks one added grant combination per validation (CEL cannot loop over
/// authorizer checks within the cost budget): the validations checking a combination must be
/// the same check for each index, and the size check must allow exactly that many.
#[test]
fn the_policys_per_combination_checks_are_one_check_for_each_index() {
    let text = std::fs::read_to_string(workspace().join("deploy/base/plugin-admission.yaml"))
        .expect("the policy");
    let policy: Value = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).expect("a document"))
        .find(|document: &Value| document["kind"] == "ValidatingAdmissionPolicy")
        .expect("a ValidatingAdmissionPolicy");
    let validations = policy["spec"]["validations"]
        .as_array()
        .expect("validations");
    let expression = |v: &Value| v["expression"].as_str().expect("expression").to_owned();
    let checks: Vec<&Value> = validations
        .iter()
        .filter(|v| expression(v).contains("variables.added["))
        .collect();
    let size_checks: Vec<String> = validations
        .iter()
        .map(expression)
        .filter(|e| e.contains("size(variables.added) <=") && !e.contains("variables.added["))
        .collect();
    assert_eq!(size_checks.len(), 1, "one size check: {size_checks:?}");
    let size_check = &size_checks[0];
    assert!(
        size_check.contains(&format!("size(variables.added) <= {}", checks.len())),
        "the size check allows as many combinations as there are checks ({}): {size_check}",
        checks.len()
    );
    // Each check with its index written as `#`.
    let shape = |i: usize, field: &str| {
        let text = checks[i][field].as_str().expect("a string").to_owned();
        text.replace(&format!("[{i}]"), "[#]")
            .replace(&format!("<= {i}\n"), "<= #\n")
            .replace(&format!("> {i} ?"), "> # ?")
    };
    for i in 0..checks.len() {
        for field in ["expression", "messageExpression"] {
            assert_eq!(
                shape(i, field),
                shape(0, field),
                "validation {} ({field}) is not the check of index {i}",
                i + 1
            );
        }
        assert!(
            shape(i, "expression").contains("added[#]"),
            "validation {} checks no combination",
            i + 1
        );
    }
}
