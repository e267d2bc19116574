"""Cleanup before an object goes away, modelled on kube-runtime's `finalizer` (and the Rust
SDK's `reconcile_guest::finalizer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from wit_world.imports import types as wit

from . import client
from .errors import NotFoundError, ReconcileError
from .objects import ObjectRef

Object = dict[str, Any]


def finalizer(
    obj: Object,
    name: str,
    apply: Callable[[Object], wit.Action],
    cleanup: Callable[[Object], wit.Action],
) -> wit.Action:
    """Runs `cleanup(obj)` before `obj` is deleted, by keeping the finalizer `name` on it, and
    `apply(obj)` the rest of the time. `name` is a qualified name your reconciler owns:
    `replicator.example.com/cleanup`.

    Flow (decided by `plan` from the object's metadata alone):

    1. Not being deleted, finalizer present: `apply(obj)`; its action is returned.
    2. Not being deleted, finalizer missing: the finalizer is added with a JSON patch and `done`
       is returned; the update brings the next reconcile, which applies. `apply` never runs on
       an object without the finalizer, so nothing is created that cleanup would not see.
    3. Being deleted (`metadata.deletionTimestamp` set), finalizer present: `cleanup(obj)`; if
       it returns, the finalizer is removed with a JSON patch and cleanup's action is returned.
    4. Being deleted, finalizer already removed: nothing to do; `done`.

    Guarantees: cleanup runs at least once before the object is deleted, and may run more than
    once, so it must be idempotent (`client.delete` of a missing object is `False`, not an
    error). Both patches start with a `test` of the finalizers list as read (or of
    `metadata.resourceVersion` when there is no list), so other controllers' finalizers are never
    overwritten; a failed test (422) is retried with a newer object.

    Errors: what `apply` or `cleanup` raise (cleanup's wrapped in a `ReconcileError` naming the
    finalizer); a failed patch (removing the finalizer from an object already gone is success).
    """
    step = plan(obj, name)
    if isinstance(step, Apply):
        return apply(obj)
    if isinstance(step, AddFinalizer):
        try:
            client.json_patch(ObjectRef.of(obj), step.patch)
        except Exception as error:
            raise ReconcileError(f"failed to add finalizer `{name}`") from error
        return wit.Action_Done()
    if isinstance(step, Cleanup):
        try:
            action = cleanup(obj)
        except Exception as error:
            raise ReconcileError(f"cleanup for finalizer `{name}` failed") from error
        try:
            client.json_patch(ObjectRef.of(obj), step.patch)
        except NotFoundError:
            pass
        except Exception as error:
            raise ReconcileError(f"failed to remove finalizer `{name}`") from error
        return action
    return wit.Action_Done()


@dataclass(frozen=True)
class Apply:
    """Not being deleted and carries the finalizer: run `apply`."""


@dataclass(frozen=True)
class AddFinalizer:
    """Not being deleted and lacks the finalizer: add it with this JSON patch."""

    patch: list[Any]


@dataclass(frozen=True)
class Cleanup:
    """Being deleted and carries the finalizer: run `cleanup`, then remove it with this patch."""

    patch: list[Any]


@dataclass(frozen=True)
class Nothing:
    """Being deleted and the finalizer is gone already."""


Step = Apply | AddFinalizer | Cleanup | Nothing


def plan(obj: Object, name: str) -> Step:
    """What `finalizer` does with `obj`, and the patch it sends, without calling the host."""
    metadata = obj.get("metadata") or {}
    deleting = metadata.get("deletionTimestamp") is not None
    finalizers = metadata.get("finalizers")
    listed = isinstance(finalizers, list) and name in finalizers
    position = finalizers.index(name) if listed else None

    if not deleting:
        if position is not None:
            return Apply()
        if finalizers is not None:
            return AddFinalizer([
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "add", "path": "/metadata/finalizers/-", "value": name},
            ])
        # RFC 6902 cannot test that a member is absent, so the guard is the version read.
        add = {"op": "add", "path": "/metadata/finalizers", "value": [name]}
        version = metadata.get("resourceVersion")
        if version is None:
            return AddFinalizer([add])
        test = {"op": "test", "path": "/metadata/resourceVersion", "value": version}
        return AddFinalizer([test, add])
    if position is None:
        return Nothing()
    return Cleanup([
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "remove", "path": f"/metadata/finalizers/{position}"},
    ])
