"""A fake host for a reconciler's unit tests: no component, no API server.

`FakeHost` stands in for the generated import functions of `wit_world` (`client`, `cache`,
`events`, `log`) with an in-memory store of objects of any kind, and records what the guest did:

    with FakeHost([config_map]) as host:
        action = reconcile(host.request(config_map))
    assert host.calls == [("patch", "v1", "ConfigMap", "default", "web")]

The store answers as an API server would in the ways reconcilers depend on: a write carrying a
`metadata.resourceVersion` other than the stored one is refused 409 `Conflict`, a write or delete
of an object that is not there 404 `NotFound`, a create of one that is 409 `AlreadyExists`; each
write bumps the object's resourceVersion. `denied` holds verbs refused as `call-error::denied`
(`{"patch"}`: as a manifest without that grant). The cache reads the same store.
"""

from __future__ import annotations

import copy
import json
from contextlib import ExitStack
from typing import Any
from unittest import mock

from componentize_py_types import Err
from wit_world.imports import cache, client, events, log
from wit_world.imports import types as wit

from .objects import Kind, ObjectRef

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" cluster-wide), name


def _key(api_version: str, kind: str, namespace: str | None, name: str) -> Key:
    return (api_version, kind, namespace or "", name)


def _key_of(obj: dict) -> Key:
    meta = obj.get("metadata") or {}
    return _key(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


def _refused(code: int, reason: str, message: str) -> Err:
    return Err(wit.CallError_Api(wit.ApiStatus(code=code, reason=reason, message=message)))


def _merge(target: Any, patch: Any) -> Any:
    """`patch` merged into `target` (RFC 7386)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value)
    return merged


def _selected(obj: dict, selector: str | None) -> bool:
    """Whether `obj`'s labels match `selector`'s `key=value` and `key` terms."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, equals, value = term.partition("=")
        if key.strip() not in labels or (equals and labels[key.strip()] != value.strip()):
            return False
    return True


class FakeHost:
    """Objects by (apiVersion, kind, namespace, name), and the guest's calls, events and logs."""

    def __init__(self, objects: list[dict] | None = None) -> None:
        self.objects: dict[Key, dict] = {}
        self._version = 0
        for obj in objects or []:
            self.put(obj)
        #: `(verb, apiVersion, kind, namespace, name)` of each client call, in order.
        self.calls: list[tuple[str, str, str, str, str]] = []
        #: `(type, reason, note, regarding)` of each event recorded.
        self.events: list[tuple[str, str, str, ObjectRef]] = []
        #: `(level, message)` of each log line.
        self.logs: list[tuple[str, str]] = []
        #: Verbs refused as `denied`, as for a manifest without that grant.
        self.denied: set[str] = set()
        self._stack = ExitStack()

    def __enter__(self) -> FakeHost:
        patches = {
            (client, "apply"): self._apply,
            (client, "create"): self._create,
            (client, "replace"): self._replace,
            (client, "patch"): self._patch,
            (client, "delete"): self._delete,
            (client, "get"): self._get,
            (cache, "get"): self._cache_get,
            (cache, "list"): self._cache_list,
            (events, "record_event"): self._record_event,
            (log, "log"): self._log,
        }
        for (module, name), fake in patches.items():
            self._stack.enter_context(mock.patch.object(module, name, fake))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def put(self, obj: dict) -> dict:
        """Stores a copy of `obj` with a new resourceVersion; the stored copy."""
        stored = copy.deepcopy(obj)
        self._version += 1
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self.objects[_key_of(stored)] = stored
        return stored

    def find(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        """The stored object, if any."""
        return self.objects.get(_key(api_version, kind, namespace, name))

    def request(self, obj: dict, requeues: int = 0, *, deleted: bool = False) -> Any:
        """The `Request` the host would pass for `obj`: stored first, as the cache holds it; or,
        `deleted`, removed, the request carrying no object."""
        from . import Request

        meta = obj["metadata"]
        target = wit.ObjectRef(
            kind=wit.Kind(api_version=obj["apiVersion"], kind=obj["kind"]),
            namespace=meta.get("namespace"),
            name=meta["name"],
        )
        if deleted:
            self.objects.pop(_key_of(obj), None)
            return Request(wit.Request(target=target, object=None, requeues=requeues))
        stored = self.put(obj)
        return Request(wit.Request(target=target, object=json.dumps(stored), requeues=requeues))

    def _check(self, verb: str, api_version: str, kind: str, namespace: str | None) -> None:
        if verb in self.denied:
            place = f"in namespace `{namespace}`" if namespace else "cluster-wide"
            raise Err(wit.CallError_Denied(
                f"plugin `test` has no grant to `{verb}` {api_version} {kind} {place}"
            ))

    def _call(self, verb: str, api_version: str, kind: str, namespace: str | None,
              name: str) -> None:
        self._check(verb, api_version, kind, namespace)
        self.calls.append((verb, api_version, kind, namespace or "", name))

    def _write(self, key: Key, obj: dict) -> str:
        sent = (obj.get("metadata") or {}).get("resourceVersion")
        stored = self.objects.get(key)
        if sent and stored is not None and sent != stored["metadata"].get("resourceVersion"):
            raise _refused(409, "Conflict", f"the object {key[3]} has been modified")
        return json.dumps(self.put(obj))

    def _apply(self, text: str, force: bool, subresource: str | None) -> str:
        obj = json.loads(text)
        key = _key_of(obj)
        self._call("patch", *key)
        current = self.objects.get(key)
        return self._write(key, _merge(current, obj) if current is not None else obj)

    def _create(self, text: str) -> str:
        obj = json.loads(text)
        key = _key_of(obj)
        self._call("create", *key)
        if key in self.objects:
            raise _refused(409, "AlreadyExists", f"{key[1]} {key[3]} already exists")
        return self._write(key, obj)

    def _replace(self, text: str) -> str:
        obj = json.loads(text)
        key = _key_of(obj)
        self._call("update", *key)
        if key not in self.objects:
            raise _refused(404, "NotFound", f"{key[1]} {key[3]} not found")
        return self._write(key, obj)

    def _patch(self, target: wit.ObjectRef, body: client.PatchBody,
               subresource: str | None) -> str:
        key = _key(target.kind.api_version, target.kind.kind, target.namespace, target.name)
        self._call("patch", *key)
        if key not in self.objects:
            raise _refused(404, "NotFound", f"{key[1]} {key[3]} not found")
        if not isinstance(body, client.PatchBody_Merge):
            raise NotImplementedError("FakeHost applies merge patches only")
        patch = json.loads(body.value)
        return self._write(key, _merge(self.objects[key], patch))

    def _delete(self, target: wit.ObjectRef) -> None:
        key = _key(target.kind.api_version, target.kind.kind, target.namespace, target.name)
        self._call("delete", *key)
        if self.objects.pop(key, None) is None:
            raise _refused(404, "NotFound", f"{key[1]} {key[3]} not found")

    def _get(self, target: wit.ObjectRef) -> str | None:
        key = _key(target.kind.api_version, target.kind.kind, target.namespace, target.name)
        self._call("get", *key)
        obj = self.objects.get(key)
        return None if obj is None else json.dumps(obj)

    def _cache_get(self, kind: wit.Kind, namespace: str | None, name: str) -> str | None:
        obj = self.objects.get(_key(kind.api_version, kind.kind, namespace, name))
        return None if obj is None else json.dumps(obj)

    def _cache_list(self, kind: wit.Kind, namespace: str | None,
                    selector: str | None) -> list[str]:
        return [
            json.dumps(obj)
            for (api_version, k, ns, _), obj in sorted(self.objects.items())
            if (api_version, k) == (kind.api_version, kind.kind)
            and (namespace is None or ns == namespace)
            and _selected(obj, selector)
        ]

    def _record_event(self, regarding: wit.ObjectRef, event_type: Any, reason: str,
                      note: str) -> None:
        ref = ObjectRef(Kind(regarding.kind.api_version, regarding.kind.kind),
                        regarding.namespace, regarding.name)
        self.events.append((event_type.name.lower(), reason, note, ref))

    def _log(self, level: Any, message: str) -> None:
        self.logs.append((level.name.lower(), message))
