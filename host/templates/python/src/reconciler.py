"""{{name}}: marks each ConfigMap labelled `{{name}}=true` as reconciled and says so in an Event."""

from __future__ import annotations

from reconcile_guest import (
    Action,
    EventType,
    ObjectRef,
    Request,
    client,
    done,
    events,
    export_reconciler,
    log,
)

#: The annotation written on each object reconciled.
MARK = "{{name}}.reconcile-host.dev/reconciled"


def reconcile(request: Request) -> Action:
    obj = request.object
    if obj is None:
        return done()  # deleted: nothing to clean up
    annotations = obj["metadata"].get("annotations") or {}
    if annotations.get(MARK) == "true":
        return done()  # marked already: writing again would only wake this reconcile again
    target = ObjectRef.of(obj)
    client.merge_patch(target, {"metadata": {"annotations": {MARK: "true"}}})
    events.record(target, EventType.NORMAL, "Reconciled", f"marked by {{name}}")
    log.info(f"marked {target}")
    return done()


WitWorld = export_reconciler(reconcile)
