//! Every installed kubectl finds the resource types; and every kubectl from 1.27 to 1.33 (the versioned binaries installed beside the Google Cloud
//! SDK's, `kubectl.1.27` ...) creates, applies (create, then an update that removes list
//! elements), diffs, patches, scales, explains (a built-in kind and a custom resource) and gets against
//! the embedded server with default flags, and its default validation refuses an unknown field. 1.27 and 1.28 read `/openapi/v2` as protobuf before
//! `apply` and `explain`; later ones read `/openapi/v3`.

use std::path::{Path, PathBuf};

use crate::common::server;
use crate::kubectl::{Kubectl, kubectl_binary, p};

const MINORS: std::ops::RangeInclusive<u32> = 27..=33;

/// `kubectl.1.<minor>` beside the default kubectl.
fn versioned(minor: u32) -> PathBuf {
    let name = format!("kubectl.1.{minor}");
    installed_kubectls()
        .into_iter()
        .find(|p| p.file_name().and_then(|n| n.to_str()) == Some(name.as_str()))
        .unwrap_or_else(|| {
            panic!(
                "{name} not found beside {}: install the Google Cloud SDK's kubectl component, \
                 which brings kubectl.1.27 to kubectl.1.33",
                kubectl_binary().display()
            )
        })
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"1\"\n";

/// Every installed kubectl: the default one plus the versioned binaries (`kubectl.1.27`, ...)
/// the Google Cloud SDK installs beside it.
fn installed_kubectls() -> Vec<PathBuf> {
    let default = kubectl_binary();
    let dir = std::fs::canonicalize(&default)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let mut versioned: Vec<PathBuf> = dir
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("kubectl.1."))
        })
        .collect();
    versioned.sort();
    versioned.insert(0, default);
    versioned
}

#[tokio::test]
async fn every_installed_kubectl_version_finds_the_resource_types() {
    let s = server().await;
    let setup = Kubectl::new(&s, "versions-setup");
    setup
        .run(&["apply", "-f", p(&setup.write("cm.yaml", CM))])
        .await
        .unwrap();
    let kubectls = installed_kubectls();
    for bin in &kubectls {
        let name = bin
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("kubectl");
        let k = Kubectl::with_binary(&s, &format!("versions-{name}"), bin.clone());
        let table = k
            .run(&["get", "cm"])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(table.contains("demo"), "{name}: {table}");
        let resources = k
            .run(&["api-resources", "-o", "name"])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        for expected in [
            "configmaps",
            "deployments.apps",
            "leases.coordination.k8s.io",
        ] {
            assert!(
                resources.lines().any(|l| l == expected),
                "{name}: {expected} missing from:\n{resources}"
            );
        }
    }
    eprintln!("checked {} kubectl binaries: {kubectls:?}", kubectls.len());
}

fn deployment(namespace: &str, containers: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {namespace}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: {containers}
"
    )
}

const TWO: &str = "[{name: web, image: 'nginx:1', ports: [{containerPort: 80}, {containerPort: 81}]}, {name: side, image: 'busybox:1'}]";
const ONE: &str = "[{name: web, image: 'nginx:1', ports: [{containerPort: 80}]}]";
const ONE_NEWER: &str = "[{name: web, image: 'nginx:2', ports: [{containerPort: 80}]}]";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, description: How many widgets the shop keeps in stock.}
";

#[tokio::test]
async fn every_kubectl_from_1_27_to_1_33_applies_diffs_patches_scales_explains_and_gets() {
    let s = server().await;
    let admin = Kubectl::new(&s, "versions-crd");
    admin
        .run(&["apply", "-f", p(&admin.write("crd.yaml", CRD))])
        .await
        .unwrap();
    for minor in MINORS {
        let k = Kubectl::with_binary(&s, &format!("versions-{minor}"), versioned(minor));
        let ns = format!("kubectl-1-{minor}");
        let who = format!("kubectl 1.{minor}");
        let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n");
        let out = k
            .run(&["create", "-f", p(&k.write("ns.yaml", &namespace))])
            .await
            .unwrap();
        assert!(out.contains("created"), "{who} create: {out}");

        let out = k
            .run(&[
                "apply",
                "-f",
                p(&k.write("d.yaml", &deployment(&ns, TWO, 1))),
            ])
            .await
            .unwrap();
        assert!(out.contains("deployment.apps/web created"), "{who}: {out}");
        let out = k
            .run(&[
                "apply",
                "-f",
                p(&k.write("d.yaml", &deployment(&ns, ONE, 2))),
            ])
            .await
            .unwrap();
        assert!(out.contains("configured"), "{who}: {out}");
        let jsonpath = "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].name} {.spec.template.spec.containers[*].ports[*].containerPort}";
        let got = k
            .run(&["get", "-n", &ns, "deployment", "web", "-o", jsonpath])
            .await
            .unwrap();
        assert_eq!(
            got, "2 web 80",
            "{who}: apply removes the container and the port the manifest no longer lists"
        );

        let (same, out) = k.status(&["diff", "-f", p(&k.path("d.yaml"))]).await;
        assert_eq!(same, Some(0), "{who} diff of the applied manifest: {out}");
        let newer = k.write("newer.yaml", &deployment(&ns, ONE_NEWER, 2));
        let (changed, out) = k.status(&["diff", "-f", p(&newer)]).await;
        assert_eq!(changed, Some(1), "{who} diff of a change: {out}");
        assert!(out.contains("+      - image: nginx:2"), "{who} diff: {out}");

        let patch =
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:3"}]}}}}"#;
        let out = k
            .run(&["patch", "-n", &ns, "deployment", "web", "-p", patch])
            .await
            .unwrap();
        assert!(out.contains("patched"), "{who} patch: {out}");
        let got = k
            .run(&[
                "get",
                "-n",
                &ns,
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.template.spec.containers[*].image}",
            ])
            .await
            .unwrap();
        assert_eq!(
            got, "nginx:3",
            "{who}: the patch merged the container by name"
        );

        let out = k
            .run(&["explain", "deployment.spec.template.spec.containers.ports"])
            .await
            .unwrap();
        assert!(
            out.contains("<[]ContainerPort>") && out.contains("containerPort"),
            "{who} explain: {out}"
        );
        let out = k.run(&["explain", "widget.spec.size"]).await.unwrap();
        assert!(
            out.contains("How many widgets the shop keeps in stock."),
            "{who} explain of a custom resource: {out}"
        );

        let unknown = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: {ns}}}\nextra: x\n"
        );
        let (code, out) = k
            .status(&["apply", "-f", p(&k.write("unknown.yaml", &unknown))])
            .await;
        assert!(
            code != Some(0) && out.contains("unknown field \"extra\""),
            "{who} validates fields by default (the server's Strict): {out}"
        );

        let out = k
            .run(&["scale", "-n", &ns, "deployment", "web", "--replicas=4"])
            .await
            .unwrap();
        assert!(out.contains("scaled"), "{who} scale: {out}");
        let got = k
            .run(&[
                "get",
                "-n",
                &ns,
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas}",
            ])
            .await
            .unwrap();
        assert_eq!(
            got, "4",
            "{who}: scale writes through the scale subresource"
        );

        let table = k.run(&["get", "-n", &ns, "deployments"]).await.unwrap();
        assert!(
            table.starts_with("NAME") && table.contains("web"),
            "{who} get: {table}"
        );
    }
}

#[tokio::test]
async fn kubectl_creates_tokens_and_answers_can_i_and_whoami_through_protobuf_requests() {
    let s = crate::common::start(embedded_apiserver::Config::default().authorization(true)).await;
    let k = Kubectl::new(&s, "token-can-i");
    k.run(&["create", "serviceaccount", "robot"]).await.unwrap();
    let token = k
        .run(&["create", "token", "robot", "--duration=10m"])
        .await
        .unwrap();
    assert_eq!(token.trim().split('.').count(), 3, "a JWT: {token}");
    let admin = k.run(&["auth", "can-i", "get", "pods"]).await.unwrap();
    assert_eq!(admin.trim(), "yes");
    let grant = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: default}
rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-reads-pods, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: robot, namespace: default}]
";
    k.run(&["apply", "-f", p(&k.write("grant.yaml", grant))])
        .await
        .unwrap();
    let robot = "--as=system:serviceaccount:default:robot";
    let (code, pods) = k.status(&["auth", "can-i", "get", "pods", robot]).await;
    assert_eq!((code, pods.trim()), (Some(0), "yes"), "granted");
    let (code, secrets) = k.status(&["auth", "can-i", "get", "secrets", robot]).await;
    assert_eq!(
        (code, secrets.trim()),
        (Some(1), "no"),
        "the review names the resource it asks about"
    );
    let whoami = k
        .run(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .await
        .unwrap();
    assert_eq!(whoami, "admin");
}
