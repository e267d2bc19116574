"""Checks the official Kubernetes Python client against the embedded API server.

Usage: python client_compat.py <kubeconfig>. Prints one line per check and exits non-zero on the
first failure.
"""
import sys
import threading

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def check(name, condition, detail=""):
    if not condition:
        print(f"FAIL {name}: {detail}")
        sys.exit(1)
    print(f"ok {name}")


def main():
    config.load_kube_config(config_file=sys.argv[1])
    v1 = client.CoreV1Api()

    def cm(name, value):
        return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"app": "py"}),
                                  data={"k": value})

    created = v1.create_namespaced_config_map("default", cm("py-a", "1"))
    v1.create_namespaced_config_map("default", cm("py-b", "1"))
    listed = v1.list_namespaced_config_map("default", label_selector="app=py")
    names = sorted(i.metadata.name for i in listed.items)
    check("list", names == ["py-a", "py-b"], names)
    check("list resourceVersion", int(listed.metadata.resource_version) >= int(created.metadata.resource_version))

    # Watch from the list's resourceVersion: sees only what happens after it.
    seen = []
    w = watch.Watch()

    def watcher():
        for event in w.stream(v1.list_namespaced_config_map, "default",
                              resource_version=listed.metadata.resource_version, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name, event["object"].data))
            if event["object"].metadata.name == "py-c":
                w.stop()

    t = threading.Thread(target=watcher)
    t.start()
    # A write after the watch started; the watch replays from the version anyway.
    v1.create_namespaced_config_map("default", cm("py-c", "1"))
    t.join(15)
    check("watch with resourceVersion", ("ADDED", "py-c", {"k": "1"}) in seen
          and not any(name in ("py-a", "py-b") for _, name, _ in seen), seen)

    # Replace with a stale resourceVersion: 409 Conflict.
    fresh = v1.read_namespaced_config_map("py-a", "default")
    fresh.data = {"k": "2"}
    v1.replace_namespaced_config_map("py-a", "default", fresh)
    stale = created
    stale.data = {"k": "3"}
    try:
        v1.replace_namespaced_config_map("py-a", "default", stale)
        check("stale replace is 409", False, "no error")
    except ApiException as e:
        check("stale replace is 409", e.status == 409 and "Conflict" in e.body, (e.status, e.body))

    # Server-side apply.
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-ssa"}, "data": {"x": "y"}}
    applied = v1.patch_namespaced_config_map("py-ssa", "default", body, field_manager="python-test",
                                             _content_type="application/apply-patch+yaml")
    check("server-side apply creates", applied.data == {"x": "y"}, applied.data)
    managers = [m.manager for m in applied.metadata.managed_fields]
    check("server-side apply records the manager", "python-test" in managers, managers)
    body["data"] = {"x": "z"}
    applied = v1.patch_namespaced_config_map("py-ssa", "default", body, field_manager="python-test",
                                             _content_type="application/apply-patch+yaml")
    check("server-side apply updates", applied.data == {"x": "z"}, applied.data)
    print("python client: all checks passed")


if __name__ == "__main__":
    main()
