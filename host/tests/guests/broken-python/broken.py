"""The broken-python test guest, for `reconcile-host check`'s tests: a reconciler exported with
the Python SDK's `export_reconciler` whose mistake is chosen by the ConfigMap's `data.fault`:

- `wrong-type`: returns the string "done" instead of `done()` (the SDK names it; a trap)
- `error`: raises (a reconcile error, which check fails unless --allow-failure)
- `swallow-denied`: reads a Secret it has no grant for, ignores the denial and answers `done()`
- anything else, or none: `done()`
"""

from reconcile_guest import DeniedError, Kind, ObjectRef, Request, client, done, export_reconciler


def reconcile(request: Request):
    fault = ((request.object or {}).get("data") or {}).get("fault")
    if fault == "wrong-type":
        return "done"
    if fault == "error":
        raise RuntimeError("broken-python: asked to fail")
    if fault == "swallow-denied":
        try:
            client.get(ObjectRef(Kind("v1", "Secret"), "default", "credentials"))
        except DeniedError:
            pass
    return done()


WitWorld = export_reconciler(reconcile)
