"""Example reconciler: copies each ConfigMap labelled `replicator.example.com/replicate=python`
into the namespaces its annotation `replicator.example.com/namespaces` lists that accept copies
(label `replicator.example.com/accept-copies=true` on the namespace), keeps the copies in sync,
removes copies from namespaces no longer listed, and deletes every copy before the source goes
away (finalizer `replicator.example.com/cleanup`).

Whoever can write a source names where copies go, and the plugin writes with the host's rights,
not theirs. So it writes only where a namespace has said yes, and it never overwrites or deletes
an object that is not a copy of this source (its copy-of label): a source cannot be used to
replace or delete what others own.

The Python port of examples/configmap-replicator (Rust), function for function. One addition:
the retry delay for a missing namespace can be set with `REPLICATOR_RETRY_SECONDS` in the
manifest's `env:`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from reconcile_guest import (
    Action,
    CallError,
    ConflictError,
    EventType,
    Kind,
    ObjectRef,
    ReconcileError,
    Request,
    cache,
    client,
    done,
    events,
    export_reconciler,
    finalizer,
    log,
    requeue_after,
)

#: The annotation listing the target namespaces, comma-separated: `"team-a, team-b"`.
NAMESPACES = "replicator.example.com/namespaces"
#: The label on each copy naming its source, `<namespace>.<name>`.
COPY_OF = "replicator.example.com/copy-of"
#: The label (value `true`) a namespace carries to accept copies.
ACCEPTS = "replicator.example.com/accept-copies"
#: The finalizer that keeps a source until its copies are deleted.
FINALIZER = "replicator.example.com/cleanup"
#: How long to wait before trying again the namespaces that got no copy, unless the manifest's
#: `env:` sets `RETRY_ENV`.
MISSING_NAMESPACE_RETRY = timedelta(seconds=30)
#: The environment variable (from the manifest's `env:`) overriding `MISSING_NAMESPACE_RETRY`,
#: in whole seconds.
RETRY_ENV = "REPLICATOR_RETRY_SECONDS"

CONFIG_MAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")

ConfigMap = dict[str, Any]


def reconcile(request: Request) -> Action:
    source = request.object
    if source is None:
        return done()  # gone: its finalizer already removed the copies
    return finalizer(source, FINALIZER, sync, cleanup)


WitWorld = export_reconciler(reconcile)


def sync(source: ConfigMap) -> Action:
    """Writes a copy into every listed namespace that accepts it, and deletes copies in
    namespaces no longer listed."""
    source_ref = ObjectRef.of(source)
    targets = target_namespaces(source)
    missing: list[str] = []
    refusing: list[str] = []
    taken: list[str] = []
    for namespace in targets:
        target = cache.get(NAMESPACE, None, namespace)
        if target is None:
            missing.append(namespace)
        elif not accepts(target):
            refusing.append(namespace)
        elif not write_copy(source, namespace):
            taken.append(namespace)
    for stale in copies(source):
        namespace = stale["metadata"].get("namespace")
        if namespace is not None and namespace not in targets:
            if delete_copy(source, ObjectRef.of(stale)):
                log.info(f"deleted the copy of {source_ref} in {namespace}, no longer listed")
    if not missing and not refusing and not taken:
        log.debug(f"{source_ref} is copied to [{', '.join(targets)}]")
        return done()
    retry = missing_namespace_retry()
    seconds = int(retry.total_seconds())
    warnings = [
        (missing, "NamespaceNotFound", "Cannot copy to namespaces that do not exist"),
        (
            refusing,
            "NamespaceNotAccepting",
            "Not copied to namespaces without the label replicator.example.com/accept-copies=true",
        ),
        (
            taken,
            "NotACopy",
            "Not copied to namespaces holding a ConfigMap of this name that is not its copy",
        ),
    ]
    for namespaces, reason, text in warnings:
        if not namespaces:
            continue
        note = f"{text}: {', '.join(namespaces)}; retrying in {seconds}s"
        try:
            events.record(source_ref, EventType.WARNING, reason, note)
        except CallError as error:
            log.warn(str(error))
    return requeue_after(retry)


def write_copy(source: ConfigMap, namespace: str) -> bool:
    """Writes the copy of `source` into `namespace`: created if the namespace has no ConfigMap
    of its name, updated if it holds the source's copy; False, and nothing written, if it holds
    anything else."""
    name = source["metadata"]["name"]
    existing = cache.get(CONFIG_MAP, namespace, name)
    if existing is None:
        try:
            client.create(copy(source, namespace))
            return True
        except ConflictError:
            # Created since the cache last heard: look at the object itself.
            existing = client.get(ObjectRef(CONFIG_MAP, namespace, name))
            if existing is None:
                return True  # deleted again meanwhile: the next reconcile sees
        except CallError as error:
            raise ReconcileError(f"failed to copy to {namespace}") from error
    if not is_copy_of(existing, source):
        return False
    try:
        client.apply(copy(source, namespace))
    except CallError as error:
        raise ReconcileError(f"failed to copy to {namespace}") from error
    return True


def delete_copy(source: ConfigMap, target: ObjectRef) -> bool:
    """Deletes `target` if it is a copy of `source` (as the API server has it now); True if this
    call deleted it."""
    live = client.get(target)
    if live is None or not is_copy_of(live, source):
        return False
    return client.delete(target)


def cleanup(source: ConfigMap) -> Action:
    """Deletes every copy: those the cache knows, and any in the listed namespaces it may not
    know yet; never an object that is not a copy of this source."""
    source_ref = ObjectRef.of(source)
    namespaces = set(target_namespaces(source))
    for known in copies(source):
        if "namespace" in known["metadata"]:
            namespaces.add(known["metadata"]["namespace"])
    for namespace in sorted(namespaces):
        target = ObjectRef(CONFIG_MAP, namespace, source_ref.name)
        if delete_copy(source, target):
            log.info(f"deleted {target}, the copy of {source_ref} being deleted")
    return done()


def accepts(namespace: dict[str, Any]) -> bool:
    """Whether the namespace accepts copies: labelled `replicator.example.com/accept-copies=true`."""
    labels = namespace.get("metadata", {}).get("labels") or {}
    return labels.get(ACCEPTS) == "true"


def is_copy_of(obj: ConfigMap, source: ConfigMap) -> bool:
    """Whether `obj` is a copy of `source`: it carries the source's copy-of label."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels.get(COPY_OF) == copy_of(source)


def missing_namespace_retry() -> timedelta:
    """`MISSING_NAMESPACE_RETRY`, or the whole seconds `RETRY_ENV` sets. Read on every call:
    module-level code runs when the component is built, before the manifest's `env:` exists."""
    value = os.environ.get(RETRY_ENV)
    if value is None:
        return MISSING_NAMESPACE_RETRY
    try:
        seconds = int(value)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise ReconcileError(f"{RETRY_ENV}={value!r} in the manifest's env: expected whole seconds")
    return timedelta(seconds=seconds)


def target_namespaces(source: ConfigMap) -> list[str]:
    """The namespaces the source's annotation lists, without its own: sorted, each once."""
    metadata = source.get("metadata", {})
    listed = (metadata.get("annotations") or {}).get(NAMESPACES, "")
    own = metadata.get("namespace")
    return sorted({ns.strip() for ns in listed.split(",") if ns.strip() and ns.strip() != own})


def copy_of(source: ConfigMap) -> str:
    """The value of the copy-of label on the source's copies: `<namespace>.<name>`."""
    metadata = source.get("metadata", {})
    return f"{metadata.get('namespace', '')}.{metadata.get('name', '')}"


def copy(source: ConfigMap, namespace: str) -> ConfigMap:
    """The copy of `source` in `namespace`: same name, data and binary data, and the copy-of
    label (not the replicate label, so copies are not sources themselves)."""
    result: ConfigMap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": source["metadata"]["name"],
            "namespace": namespace,
            "labels": {COPY_OF: copy_of(source)},
        },
    }
    for field in ("data", "binaryData"):
        if source.get(field) is not None:
            result[field] = source[field]
    return result


def copies(source: ConfigMap) -> list[ConfigMap]:
    """The source's copies the cache holds, in every namespace."""
    return cache.list(CONFIG_MAP, None, f"{COPY_OF}={copy_of(source)}")
