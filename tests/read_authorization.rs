//! The host's decisions on plugins' cached reads against the real kube-apiserver's: for a
//! ServiceAccount bound to a mix of Roles and ClusterRoles (by RoleBinding, by
//! ClusterRoleBinding, to the account, to its user name, to its namespace's group; rules with
//! and without `resourceNames`), at least 1,000 random (verb, group, resource, namespace, name)
//! reads decided by [`ReadAuthorizer`] equal what the API server answers the account itself (a
//! SelfSubjectAccessReview sent impersonating it, so the server, not the host, says which groups
//! it has). A RoleBinding added and then removed changes the host's decision within
//! [`DECISION_TTL`]. On both servers (the embedded one with its authorization on).

use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use reconcile_host::authz::{DECISION_TTL, Read, ReadAuthorizer};
use reconcile_host::config::ServiceAccountRef;

use crate::common::backend::{Backend, Cluster};
use embedded_apiserver::Config;

const NAMESPACES: [&str; 4] = ["reads-1", "reads-2", "reads-3", "reads-4"];
const RESOURCES: [(&str, &str); 5] = [
    ("", "configmaps"),
    ("", "secrets"),
    ("", "pods"),
    ("apps", "deployments"),
    ("batch", "jobs"),
];
const NAMES: [&str; 3] = ["a", "b", "c"];
/// Reads compared.
const READS: usize = 1_000;

/// The account's RBAC: every way a grant can reach it.
const RBAC: &str = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: reads, namespace: reads-2},
   rules: [{apiGroups: [""], resources: [configmaps], resourceNames: [a], verbs: [get]},
           {apiGroups: [""], resources: [secrets], verbs: [list]}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: reads, namespace: reads-2},
   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reads},
   subjects: [{kind: ServiceAccount, name: reader, namespace: reads-1}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: reads-deployments},
   rules: [{apiGroups: [apps], resources: [deployments], verbs: [get, list]}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: reads-deployments, namespace: reads-3},
   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reads-deployments},
   subjects: [{kind: ServiceAccount, name: reader, namespace: reads-1}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: reads-jobs},
   rules: [{apiGroups: [batch], resources: [jobs], verbs: [list]}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: reads-jobs},
   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reads-jobs},
   subjects: [{kind: Group, name: "system:serviceaccounts:reads-1", apiGroup: rbac.authorization.k8s.io}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: reads-pods},
   rules: [{apiGroups: [""], resources: [pods], resourceNames: [b, c], verbs: [get]}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: reads-pods},
   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reads-pods},
   subjects: [{kind: ServiceAccount, name: reader, namespace: reads-1}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: reads-all, namespace: reads-4},
   rules: [{apiGroups: [""], resources: ["*"], verbs: ["*"]}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: reads-all, namespace: reads-4},
   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reads-all},
   subjects: [{kind: User, name: "system:serviceaccount:reads-1:reader", apiGroup: rbac.authorization.k8s.io}]}
"#;

/// A RoleBinding the test adds and removes: `secrets` get in `reads-1` (through the Role of
/// `reads-4`'s kind, re-created there).
const LATE: &str = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: reads-late, namespace: reads-1},
   rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: reads-late, namespace: reads-1},
   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reads-late},
   subjects: [{kind: ServiceAccount, name: reader, namespace: reads-1}]}
"#;

/// splitmix64: the same reads for the same seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::try_from(self.next() % from.len() as u64).unwrap_or(0)]
    }
}

fn apply(backend: &Backend, verb: &str, yaml: &str) {
    let dir = crate::common::host::scratch("read-authorization");
    let path = dir.join(format!("{verb}.yaml"));
    std::fs::write(&path, yaml).expect("written");
    let output = backend
        .kubectl(&dir)
        .arg(verb)
        // The embedded server serves no OpenAPI schema for a `List` to be checked against.
        .args(if verb == "apply" {
            &["--validate=false"][..]
        } else {
            &[]
        })
        .arg("-f")
        .arg(&path)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {verb} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What the API server answers the account itself.
async fn truth(reviews: &Api<SelfSubjectAccessReview>, read: Read<'_>) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(read.verb.to_owned()),
                group: Some(read.group.to_owned()),
                resource: Some(read.resource.to_owned()),
                namespace: read.namespace.map(ToOwned::to_owned),
                name: read.name.map(ToOwned::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .expect("the API server reviews the account's own access");
    answer.status.is_some_and(|status| status.allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_read_decisions_equal_the_api_servers_for_a_thousand_random_reads() {
    let backend = Backend::start(Config::default().authorization(true))
        .await
        .expect("API server starts");
    let dir = crate::common::host::scratch("read-authorization");
    for namespace in NAMESPACES {
        let _ = backend
            .kubectl(&dir)
            .args(["create", "namespace", namespace])
            .output();
    }
    let _ = backend
        .kubectl(&dir)
        .args(["create", "serviceaccount", "reader", "-n", "reads-1"])
        .output();
    apply(&backend, "apply", RBAC);
    let account = ServiceAccountRef::parse("reads-1/reader").expect("account");
    let reviews: Api<SelfSubjectAccessReview> = Api::all(backend.kube_client_as(&account.user()));
    let host = ReadAuthorizer::new(backend.client());

    let seed = std::env::var("READS_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(1);
    let mut random = Random(seed);
    let (mut allowed, mut differ) = (0, Vec::new());
    for _ in 0..READS {
        let verb = random.pick(&["get", "list"]);
        let (group, resource) = random.pick(&RESOURCES);
        let namespace = if verb == "list" && random.next().is_multiple_of(5) {
            None
        } else {
            Some(random.pick(&NAMESPACES))
        };
        let name = (verb == "get").then(|| random.pick(&NAMES));
        let read = Read {
            verb,
            group,
            resource,
            namespace,
            name,
        };
        let decided = host
            .allowed(&account, read)
            .await
            .expect("the host decides");
        let expected = truth(&reviews, read).await;
        allowed += usize::from(expected);
        if decided != expected {
            differ.push(format!("{read:?}: host {decided}, API server {expected}"));
        }
    }
    assert!(
        differ.is_empty(),
        "seed {seed}: {} of {READS} decisions differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert!(
        allowed > READS / 10 && allowed < READS * 9 / 10,
        "seed {seed}: the reads mix allowed and refused ones ({allowed} of {READS} allowed)"
    );
    eprintln!("seed {seed}: {READS} reads, {allowed} allowed, every decision the API server's");

    // A binding added, then removed: the host follows within the time an answer is kept.
    let late = Read {
        verb: "get",
        group: "",
        resource: "secrets",
        namespace: Some("reads-1"),
        name: Some("a"),
    };
    assert!(!host.allowed(&account, late).await.expect("decided"));
    for (verb, wanted) in [("apply", true), ("delete", false)] {
        apply(&backend, verb, LATE);
        let changed = Instant::now();
        while truth(&reviews, late).await != wanted {
            assert!(
                changed.elapsed() < Duration::from_secs(10),
                "the API server follows RBAC"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        loop {
            if host.allowed(&account, late).await.expect("decided") == wanted {
                break;
            }
            assert!(
                changed.elapsed() <= DECISION_TTL + Duration::from_secs(1),
                "the host still decides as before the binding was {verb}d after {:?}",
                changed.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "binding {verb}: the host's decision followed after {:?} (kept for at most {DECISION_TTL:?})",
            changed.elapsed()
        );
    }
}
