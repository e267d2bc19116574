"""A fake host for unit tests: stands in for the generated import functions of `wit_world`
with an in-memory set of ConfigMaps and namespaces, and records what the guest did."""

from __future__ import annotations

import copy
import json
from contextlib import ExitStack
from unittest import mock

from componentize_py_types import Err
from wit_world.imports import cache, client, events, log
from wit_world.imports import types as wit

#: The label of a namespace that accepts copies (as `replicator.ACCEPTS`).
ACCEPTS = "replicator.example.com/accept-copies"


def not_found(message: str) -> Err:
    return Err(wit.CallError_Api(wit.ApiStatus(code=404, reason="NotFound", message=message)))


def check_version(stored: dict, sent: dict) -> None:
    """The API server's precondition: a write that carries a `metadata.resourceVersion` other
    than the stored object's is refused with 409 Conflict (an empty one is none)."""
    version = (sent.get("metadata") or {}).get("resourceVersion")
    if version and version != stored["metadata"].get("resourceVersion"):
        name = stored["metadata"]["name"]
        raise Err(wit.CallError_Api(wit.ApiStatus(
            code=409, reason="Conflict",
            message=f'Operation cannot be fulfilled on configmaps "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
        )))


def merge(target: object, patch: object) -> object:
    """`patch` merged into `target` (RFC 7386)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge(merged.get(key), value)
    return merged


class FakeHost:
    """ConfigMaps by (namespace, name), the namespaces that exist (all accepting copies but
    those in `refusing`), and the guest's calls."""

    def __init__(
        self,
        namespaces: list[str],
        objects: list[dict] | None = None,
        refusing: list[str] | None = None,
    ) -> None:
        self.namespaces = set(namespaces)
        self.refusing = set(refusing or [])
        self.objects: dict[tuple[str, str], dict] = {}
        for obj in objects or []:
            self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        self.calls: list[tuple] = []
        self.events: list[tuple[str, wit.ObjectRef, str, str]] = []
        self.logs: list[tuple[str, str]] = []
        #: Verbs refused as `denied`, like a manifest without that grant.
        self.denied: set[str] = set()
        self._stack = ExitStack()

    def __enter__(self) -> FakeHost:
        patches = {
            (client, "apply"): self.apply,
            (client, "create"): self.create,
            (client, "get"): self.get,
            (client, "patch"): self.patch,
            (client, "delete"): self.delete,
            (cache, "get"): self.cache_get,
            (cache, "list"): self.list,
            (events, "record_event"): self.record_event,
            (log, "log"): self.log,
        }
        for (module, name), fake in patches.items():
            self._stack.enter_context(mock.patch.object(module, name, fake))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _check(self, verb: str, namespace: str) -> None:
        if verb in self.denied:
            raise Err(wit.CallError_Denied(
                f"plugin `test` has no grant to `{verb}` v1 ConfigMap in namespace `{namespace}`"
            ))

    def apply(self, text: str, force: bool, subresource: str | None) -> str:
        obj = json.loads(text)
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        self._check("patch", namespace)
        self.calls.append(("apply", namespace, name, obj))
        if namespace not in self.namespaces:
            raise not_found(f'namespaces "{namespace}" not found')
        if (namespace, name) in self.objects:
            check_version(self.objects[(namespace, name)], obj)
        self.objects[(namespace, name)] = obj
        return json.dumps(obj)

    def create(self, text: str) -> str:
        obj = json.loads(text)
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        self._check("create", namespace)
        self.calls.append(("create", namespace, name, obj))
        if namespace not in self.namespaces:
            raise not_found(f'namespaces "{namespace}" not found')
        if (namespace, name) in self.objects:
            raise Err(wit.CallError_Api(wit.ApiStatus(
                code=409, reason="AlreadyExists", message=f'configmaps "{name}" already exists'
            )))
        self.objects[(namespace, name)] = obj
        return json.dumps(obj)

    def get(self, target: wit.ObjectRef) -> str | None:
        self._check("get", target.namespace)
        self.calls.append(("get", target.namespace, target.name))
        obj = self.objects.get((target.namespace, target.name))
        return None if obj is None else json.dumps(obj)

    def cache_get(self, kind: wit.Kind, namespace: str | None, name: str) -> str | None:
        if kind.kind == "Namespace":
            if name not in self.namespaces:
                return None
            labels = {} if name in self.refusing else {ACCEPTS: "true"}
            return json.dumps({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": name, "labels": labels}})
        obj = self.objects.get((namespace, name))
        return None if obj is None else json.dumps(obj)

    def patch(self, target: wit.ObjectRef, body: client.PatchBody, subresource: str | None) -> str:
        """Merge patches, and JSON patches of test, add and remove."""
        self._check("patch", target.namespace)
        operations = json.loads(body.value)
        self.calls.append(("patch", target.namespace, target.name, operations))
        key = (target.namespace, target.name)
        if key not in self.objects:
            raise not_found(f'configmaps "{target.name}" not found')
        if isinstance(body, client.PatchBody_Merge):
            check_version(self.objects[key], operations)
            self.objects[key] = merge(self.objects[key], operations)
            return json.dumps(self.objects[key])
        obj = copy.deepcopy(self.objects[key])
        for op in operations:
            parent, _, last = op["path"].rpartition("/")
            node = obj
            for part in parent.strip("/").split("/"):
                node = node[part]
            if op["op"] == "test" and node.get(last) != op["value"]:
                raise Err(wit.CallError_Api(wit.ApiStatus(422, "Invalid", "test failed")))
            if op["op"] == "add" and last == "-":
                node.append(op["value"])
            elif op["op"] == "add":
                node[last] = op["value"]
            elif op["op"] == "remove":
                del node[int(last)]
        self.objects[key] = obj
        return json.dumps(obj)

    def delete(self, target: wit.ObjectRef) -> None:
        self._check("delete", target.namespace)
        self.calls.append(("delete", target.namespace, target.name))
        if self.objects.pop((target.namespace, target.name), None) is None:
            raise not_found(f'configmaps "{target.name}" not found')

    def list(self, kind: wit.Kind, namespace: str | None, selector: str | None) -> list[str]:
        key, _, value = (selector or "").partition("=")
        return [
            json.dumps(obj)
            for (ns, _), obj in sorted(self.objects.items())
            if (namespace is None or ns == namespace)
            and (not key or (obj["metadata"].get("labels") or {}).get(key) == value)
        ]

    def record_event(self, regarding: wit.ObjectRef, event_type, reason: str, note: str) -> None:
        self.events.append((event_type.name, regarding, reason, note))

    def log(self, level, message: str) -> None:
        self.logs.append((level.name, message))
