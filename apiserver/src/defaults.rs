//! The defaults a real API server fills into Deployments, pod templates and Services on every
//! write (upstream's `SetDefaults_*` functions for apps/v1 and core/v1, the fields a plugin is
//! most likely to compare), so a reconciler that diffs what it wrote against what it reads sees
//! the same drift in `dev` as in a cluster; and a Service's cluster IP, allocated afterwards.

use serde_json::{Value, json};

use crate::resources::Resource;

/// Fills in the defaults of `obj` (a write of kind `res`), before the writer's managed fields
/// are recorded (upstream defaults while decoding, so the writer owns them); a custom resource
/// is pruned and defaulted by its CRD's schema ([`crate::structural`]); a built-in kind loses
/// the fields its type does not declare, as upstream's decoding drops them.
pub fn apply(res: &Resource, obj: &mut Value) {
    if res.crd.is_some() {
        crate::structural::apply(res, obj);
        return;
    }
    crate::schemas::known_fields::prune(res, obj);
    match (res.group.as_str(), res.kind.as_str()) {
        ("apps", "Deployment") => {
            deployment(obj);
            template(obj.pointer_mut("/spec/template/spec"));
        }
        ("apps", "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            template(obj.pointer_mut("/spec/template/spec"));
        }
        ("batch", "CronJob") => template(obj.pointer_mut("/spec/jobTemplate/spec/template/spec")),
        ("", "Pod") => template(obj.get_mut("spec")),
        ("", "Service") => service(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(obj),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => subjects(obj),
        _ => {}
    }
}

/// A binding's User and Group subjects get `apiGroup: rbac.authorization.k8s.io` (upstream's
/// `SetDefaults_Subject`; a ServiceAccount's stays empty).
fn subjects(obj: &mut Value) {
    let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for subject in subjects {
        let kind = subject
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if matches!(kind, "User" | "Group") {
            default(subject, "apiGroup", json!("rbac.authorization.k8s.io"));
        }
    }
}

/// What the server allocates after the writer's managed fields are recorded (so the writer
/// does not own it): a Service's cluster IP, kept from `current` on an update, and its IP family
/// fields.
pub fn allocate(res: &Resource, obj: &mut Value, current: Option<&Value>) {
    if res.crd.is_none() && res.group.is_empty() && res.kind == "Service" {
        cluster_ip(obj, current);
    }
}

fn crd(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
        default(spec, "conversion", json!({"strategy": "None"}));
        let kind = spec
            .pointer("/names/kind")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let (Some(kind), Some(names)) = (kind, spec.get_mut("names")) {
            default(names, "listKind", json!(format!("{kind}List")));
        }
    }
}

/// Inserts `value` at `key` of the object `target` when absent.
fn default(target: &mut Value, key: &str, value: Value) {
    if let Some(map) = target.as_object_mut() {
        map.entry(key).or_insert(value);
    }
}

fn deployment(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    default(spec, "strategy", json!({"type": "RollingUpdate"}));
    if let Some(strategy) = spec.get_mut("strategy")
        && strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
    {
        default(strategy, "rollingUpdate", json!({}));
        if let Some(rolling) = strategy.get_mut("rollingUpdate") {
            default(rolling, "maxUnavailable", json!("25%"));
            default(rolling, "maxSurge", json!("25%"));
        }
    }
    default(obj, "status", json!({}));
}

/// A pod spec's defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`).
fn template(spec: Option<&mut Value>) {
    let Some(spec) = spec.filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        let containers = spec.get_mut(list).and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            let latest = container
                .get("image")
                .and_then(Value::as_str)
                .is_some_and(|image| {
                    let name = image.rsplit('/').next().unwrap_or(image);
                    !image.contains('@') && name.split_once(':').is_none_or(|(_, t)| t == "latest")
                });
            let pull = if latest { "Always" } else { "IfNotPresent" };
            default(container, "imagePullPolicy", json!(pull));
            default(
                container,
                "terminationMessagePath",
                json!("/dev/termination-log"),
            );
            default(container, "terminationMessagePolicy", json!("File"));
            default(container, "resources", json!({}));
            let ports = container.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten() {
                default(port, "protocol", json!("TCP"));
            }
        }
    }
}

/// A Service's defaults.
fn service(obj: &mut Value) {
    default(obj, "status", json!({"loadBalancer": {}}));
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "type", json!("ClusterIP"));
    let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_owned();
    default(spec, "sessionAffinity", json!("None"));
    let ports = spec.get_mut("ports").and_then(Value::as_array_mut);
    for port in ports.into_iter().flatten() {
        default(port, "protocol", json!("TCP"));
        if port.get("targetPort").is_none()
            && let Some(number) = port.get("port").cloned()
        {
            port["targetPort"] = number;
        }
    }
    if kind != "ExternalName" {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
}

/// A Service's cluster IP: as sent, else kept from `current`, else allocated.
fn cluster_ip(obj: &mut Value, current: Option<&Value>) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
        return;
    }
    let kept = current
        .and_then(|c| c.pointer("/spec/clusterIP"))
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty());
    let ip = match (spec.get("clusterIP").and_then(Value::as_str), kept) {
        (Some(ip), _) if !ip.is_empty() => ip.to_owned(),
        (_, Some(kept)) => kept.to_owned(),
        _ => random_ip(),
    };
    spec["clusterIP"] = json!(ip);
    default(spec, "clusterIPs", json!([ip]));
    default(spec, "ipFamilies", json!(["IPv4"]));
    default(spec, "ipFamilyPolicy", json!("SingleStack"));
}

/// A cluster IP in 10.96.0.0/12 (kubeadm's default range), random: nothing routes to it here.
fn random_ip() -> String {
    let uid = crate::util::new_uid();
    let n = u64::from_str_radix(&uid[..8], 16).unwrap_or_default();
    format!(
        "10.{}.{}.{}",
        96 + (n % 16),
        (n >> 8) % 256,
        1 + (n >> 16) % 254
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn res(group: &str, plural: &str) -> Resource {
        Registry::default()
            .find(group, "v1", plural)
            .expect(plural)
            .as_ref()
            .clone()
    }

    #[test]
    fn a_deployment_gets_upstream_defaults_and_keeps_what_was_sent() {
        let mut d = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "busybox"}]}}}});
        apply(&res("apps", "deployments"), &mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(pod["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            pod["containers"][1]["imagePullPolicy"], "Always",
            "no tag means latest"
        );
        assert_eq!(d["status"], json!({}));
    }

    #[test]
    fn a_service_gets_a_cluster_ip_that_updates_keep() {
        let mut s = json!({"spec": {"ports": [{"port": 80}]}});
        apply(&res("", "services"), &mut s);
        assert!(
            s["spec"].get("clusterIP").is_none(),
            "allocated after recording"
        );
        allocate(&res("", "services"), &mut s, None);
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
        let ip = s["spec"]["clusterIP"]
            .as_str()
            .expect("allocated")
            .to_owned();
        assert!(ip.starts_with("10."), "{ip}");
        let mut update = json!({"spec": {"ports": [{"port": 81}]}});
        apply(&res("", "services"), &mut update);
        allocate(&res("", "services"), &mut update, Some(&s));
        assert_eq!(update["spec"]["clusterIP"], ip.as_str());
        assert_eq!(update["spec"]["clusterIPs"], json!([ip]));
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        allocate(&res("", "services"), &mut headless, None);
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    }
}
