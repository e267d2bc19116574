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


def apply_at_version(obj: Object, resource_version: str) -> Object:
    """Server-side applies `obj` as `apply` does (with `force`), only if the object is still at
    `resource_version`: the API server refuses the write with `ConflictError` (409) when anyone
    wrote the object since. Pass the version the reconcile read it at (the cached object's
    `metadata.resourceVersion`), so a write made from a stale read, or one that left a replica
    after another had taken its work over, changes nothing. `obj` itself is not changed.

    Raises `TypeError` (`obj` or its `metadata` is not a dict, the version not a string) or
    `ValueError` (an empty version) without calling the host."""
    return apply(_at_version(obj, resource_version))


def merge_patch(target: ObjectRef, patch: Any, *, subresource: str | None = None) -> Object:
    """Applies a JSON merge patch (RFC 7386) to `target`; returns the object as stored."""
    return _patch(target, host.PatchBody_Merge(json.dumps(patch)), subresource)


def merge_patch_at_version(target: ObjectRef, patch: Object, resource_version: str) -> Object:
    """Applies a JSON merge patch as `merge_patch` does, only if the object is still at
    `resource_version` (`ConflictError` otherwise, see `apply_at_version`). `patch` itself is
    not changed; the errors before any call are those of `apply_at_version`."""
    return merge_patch(target, _at_version(patch, resource_version))


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


def _at_version(document: Any, resource_version: str) -> Object:
    """A copy of `document` (an object to apply or a merge patch) with
    `metadata.resourceVersion` set to `resource_version`, replacing any it carries: the API
    server takes it as a precondition."""
    if not isinstance(resource_version, str):
        raise TypeError(
            "the resourceVersion of a precondition is a string (the metadata.resourceVersion of "
            f"the object as the reconcile read it), got {type(resource_version).__name__}"
        )
    if not resource_version:
        raise ValueError(
            "an empty resourceVersion is no precondition; pass the metadata.resourceVersion of "
            "the object as the reconcile read it"
        )
    if not isinstance(document, dict):
        raise TypeError(
            "a write with a resourceVersion precondition needs a JSON object (an object to "
            f"apply or a merge patch, a dict), not {type(document).__name__}"
        )
    metadata = document.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a JSON object (a dict), not {type(metadata).__name__}")
    return {**document, "metadata": {**metadata, "resourceVersion": resource_version}}


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
