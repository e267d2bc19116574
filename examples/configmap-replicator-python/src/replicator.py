"""Example reconciler: copies each ConfigMap labelled `replicator.example.com/replicate=python`
into the namespaces its annotation `replicator.example.com/namespaces` lists, keeps the copies in
sync, removes copies from namespaces no longer listed, and deletes every copy before the source
goes away (finalizer `replicator.example.com/cleanup`).

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
    EventType,
    Kind,
    NotFoundError,
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
#: The finalizer that keeps a source until its copies are deleted.
FINALIZER = "replicator.example.com/cleanup"
#: How long to wait before retrying when a target namespace does not exist, unless the
#: manifest's `env:` sets `RETRY_ENV`.
MISSING_NAMESPACE_RETRY = timedelta(seconds=30)
#: The environment variable (from the manifest's `env:`) overriding `MISSING_NAMESPACE_RETRY`,
#: in whole seconds.
RETRY_ENV = "REPLICATOR_RETRY_SECONDS"

CONFIG_MAP = Kind("v1", "ConfigMap")

ConfigMap = dict[str, Any]


def reconcile(request: Request) -> Action:
    source = request.object
    if source is None:
        return done()  # gone: its finalizer already removed the copies
    return finalizer(source, FINALIZER, sync, cleanup)


WitWorld = export_reconciler(reconcile)


def sync(source: ConfigMap) -> Action:
    """Applies a copy to every listed namespace and deletes copies in namespaces no longer
    listed."""
    source_ref = ObjectRef.of(source)
    targets = target_namespaces(source)
    missing = []
    for namespace in targets:
        try:
            client.apply(copy(source, namespace))
        except NotFoundError:
            # A namespaced write into a namespace that does not exist answers 404.
            missing.append(namespace)
        except CallError as error:
            raise ReconcileError(f"failed to copy to {namespace}") from error
    for stale in copies(source):
        namespace = stale["metadata"].get("namespace")
        if namespace is not None and namespace not in targets:
            client.delete(ObjectRef.of(stale))
            log.info(f"deleted the copy of {source_ref} in {namespace}, no longer listed")
    if not missing:
        log.debug(f"{source_ref} is copied to [{', '.join(targets)}]")
        return done()
    retry = missing_namespace_retry()
    seconds = int(retry.total_seconds())
    note = (
        f"Cannot copy to namespaces that do not exist: {', '.join(missing)}; "
        f"retrying in {seconds}s"
    )
    try:
        events.record(source_ref, EventType.WARNING, "NamespaceNotFound", note)
    except CallError as error:
        log.warn(str(error))
    return requeue_after(retry)


def cleanup(source: ConfigMap) -> Action:
    """Deletes every copy: those the cache knows, and any in the listed namespaces it may not
    know yet."""
    source_ref = ObjectRef.of(source)
    namespaces = set(target_namespaces(source))
    for known in copies(source):
        if "namespace" in known["metadata"]:
            namespaces.add(known["metadata"]["namespace"])
    for namespace in sorted(namespaces):
        target = ObjectRef(CONFIG_MAP, namespace, source_ref.name)
        if client.delete(target):
            log.info(f"deleted {target}, the copy of {source_ref} being deleted")
    return done()


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
