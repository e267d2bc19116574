"""Writes to, and live reads from, the API server through the host.

Every call is checked against the grants of the plugin's manifest (kind x verb x namespace)
before it reaches the API server; a call outside them raises `DeniedError`. Server-side apply
uses the plugin's name as field manager. Objects are dicts in JSON form, with `apiVersion`,
`kind` and `metadata` (`name`, and `namespace` for namespaced kinds).
"""

from __future__ import annotations

import json
from typing import Any

from wit_world.imports import client as host

from .errors import NotFoundError, call_host
from .objects import ObjectRef

Object = dict[str, Any]


def apply(obj: Object, *, force: bool = True, subresource: str | None = None) -> Object:
    """Server-side applies `obj` and returns the object as stored. `force` (the default, as
    controllers usually want) takes over fields other managers own; `subresource="status"`
    applies only the status. Needs verb `patch` on the kind (and the subresource) in the
    grants."""
    what = "apply the status of" if subresource else "apply"
    doing = f"failed to {what} {_describe(obj)}"
    stored = call_host(doing, host.apply, json.dumps(obj), force, subresource)
    return json.loads(stored)


def merge_patch(target: ObjectRef, patch: Any, *, subresource: str | None = None) -> Object:
    """Applies a JSON merge patch (RFC 7386) to `target`; returns the object as stored."""
    return _patch(target, host.PatchBody_Merge(json.dumps(patch)), subresource)


def json_patch(
    target: ObjectRef, operations: list[Any], *, subresource: str | None = None
) -> Object:
    """Applies a JSON patch (RFC 6902, a list of operations) to `target`; returns the object as
    stored. A failed `test` operation fails the whole patch (422), which is how optimistic
    updates are written."""
    return _patch(target, host.PatchBody_Json(json.dumps(operations)), subresource)


def strategic_patch(target: ObjectRef, patch: Any, *, subresource: str | None = None) -> Object:
    """Applies a strategic merge patch (built-in kinds only) to `target`; returns the object as
    stored."""
    return _patch(target, host.PatchBody_Strategic(json.dumps(patch)), subresource)


def create(obj: Object) -> Object:
    """Creates `obj`; returns it as stored. Raises `ConflictError` if it exists."""
    doing = f"failed to create {_describe(obj)}"
    return json.loads(call_host(doing, host.create, json.dumps(obj)))


def replace(obj: Object) -> Object:
    """Replaces the object with `obj`, which must carry the `metadata.resourceVersion` it was
    read at (`ConflictError` if it changed since). Returns it as stored."""
    doing = f"failed to replace {_describe(obj)}"
    return json.loads(call_host(doing, host.replace, json.dumps(obj)))


def delete(target: ObjectRef) -> bool:
    """Deletes `target` (owned objects are garbage collected). Returns `True` if this call
    deleted it (or started its deletion), `False` if it was already gone."""
    try:
        call_host(f"failed to delete {target}", host.delete, target.to_wit())
    except NotFoundError:
        return False
    return True


def get(target: ObjectRef) -> Object | None:
    """Reads `target` from the API server (not the cache); `None` if it does not exist."""
    text = call_host(f"failed to get {target}", host.get, target.to_wit())
    return None if text is None else json.loads(text)


def _patch(target: ObjectRef, body: host.PatchBody, subresource: str | None) -> Object:
    what = "patch the status of" if subresource else "patch"
    doing = f"failed to {what} {target}"
    stored = call_host(doing, host.patch, target.to_wit(), body, subresource)
    return json.loads(stored)


def _describe(obj: Object) -> str:
    """`v1 ConfigMap team-a/settings`, or `an object` when it lacks what names it."""
    try:
        return str(ObjectRef.of(obj))
    except Exception:
        return "an object"
