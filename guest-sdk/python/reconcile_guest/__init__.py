"""A small Python layer over the bindings componentize-py generates from `wit/reconcile.wit`.

```python
from reconcile_guest import Action, Request, client, done, export_reconciler

def reconcile(request: Request) -> Action:
    obj = request.object
    if obj is None:
        return done()
    ...
    return done()

WitWorld = export_reconciler(reconcile)
```

- `Request`: the target, the cached object parsed from JSON (`None` when deleted), `requeues`.
- Actions: `done()`, `requeue()`, `requeue_after(seconds or timedelta)`.
- Imports: `cache`, `client`, `events` and `log`, taking and returning dicts; a failed call
  raises a typed `CallError` (`DeniedError`, `InvalidError`, `ApiError` with `NotFoundError`
  and `ConflictError`, `UnavailableError`).
- Errors: any exception leaving `reconcile` becomes the WIT `reconcile-error`, its message the
  chain of causes (`raise ReconcileError("...") from error`); the host logs it and retries.
- `finalizer(...)`: cleanup before an object goes away.
- `print()` and the `logging` module reach the host's log through WASI stdout and stderr (the
  host logs their lines at info and warn); `export_reconciler` flushes both after each call.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any, Callable

from componentize_py_types import Err
from wit_world.imports import types as wit

from . import cache, client, events, log
from .errors import (
    ApiError,
    CallError,
    ConflictError,
    DeniedError,
    InvalidError,
    NotFoundError,
    ReconcileError,
    UnavailableError,
    describe,
)
from .events import EventType
from .finalizer import finalizer
from .objects import Kind, ObjectRef

__all__ = [
    "Action", "ApiError", "CallError", "ConflictError", "DeniedError", "EventType",
    "InvalidError", "Kind", "NotFoundError", "ObjectRef", "ReconcileError", "Request",
    "UnavailableError", "cache", "client", "describe", "done", "events", "export_reconciler",
    "finalizer", "log", "requeue", "requeue_after",
]

#: What the host does with the key after a successful reconcile: `done()`, `requeue()` or
#: `requeue_after(...)` (the WIT variant `action`).
Action = wit.Action

#: The longest `requeue_after` the WIT's `u32` milliseconds can carry (about 49 days).
MAX_REQUEUE_AFTER = timedelta(milliseconds=2**32 - 1)


def done() -> Action:
    """Nothing until the object changes (or the plugin's resync); forgets earlier failures."""
    return wit.Action_Done()


def requeue() -> Action:
    """Again soon, after the key's rate-limiter backoff."""
    return wit.Action_Requeue()


def requeue_after(delay: timedelta | float) -> Action:
    """Again after `delay` (a `timedelta`, or seconds); forgets earlier failures. Raises
    `ValueError` for a negative delay or one over `MAX_REQUEUE_AFTER`."""
    if not isinstance(delay, timedelta):
        delay = timedelta(seconds=delay)
    if delay < timedelta(0) or delay > MAX_REQUEUE_AFTER:
        raise ValueError(f"requeue_after({delay}) is outside 0 to {MAX_REQUEUE_AFTER}")
    return wit.Action_RequeueAfter(delay // timedelta(milliseconds=1))


class Request:
    """One reconcile: which object to look at, and the object as the host's cache holds it now.

    Reconcilers are level-based: the request says which object to look at, never what changed.
    """

    def __init__(self, raw: wit.Request) -> None:
        self._raw = raw
        self._parsed: dict[str, Any] | None = None
        #: The kind, namespace and name of the object to reconcile (the plugin's `for` kind).
        self.target = ObjectRef.from_wit(raw.target)

    @property
    def name(self) -> str:
        """The target's name."""
        return self.target.name

    @property
    def namespace(self) -> str | None:
        """The target's namespace; `None` for cluster-scoped kinds."""
        return self.target.namespace

    @property
    def requeues(self) -> int:
        """How many times in a row this key has been retried with backoff (after a failure or a
        `requeue`); 0 after `done` or `requeue_after`."""
        return self._raw.requeues

    @property
    def json(self) -> str | None:
        """The cached object as JSON text, unparsed; `None` when it no longer exists."""
        return self._raw.object

    @property
    def object(self) -> dict[str, Any] | None:
        """The cached object parsed (once) into dicts and lists; `None` when it no longer
        exists (deleted, and any finalizers have run)."""
        if self._parsed is None and self._raw.object is not None:
            self._parsed = json.loads(self._raw.object)
        return self._parsed


#: The WIT `action` cases: what `reconcile` must return.
_ACTIONS = (wit.Action_Done, wit.Action_Requeue, wit.Action_RequeueAfter)


def _return_lines(code: Any, returned: object) -> list[int]:
    """The lines of `code`'s `return` statements that return the constant `returned`; if none
    does (a computed value), the lines of all its `return` statements."""
    import dis  # only when a reconciler returned something that is not an action

    matching: list[int] = []
    every: list[int] = []
    previous = None
    for instruction in dis.get_instructions(code):
        line = instruction.positions.lineno if instruction.positions else None
        if instruction.opname in ("RETURN_VALUE", "RETURN_CONST") and line is not None:
            every.append(line)
            constant = (
                instruction.argval
                if instruction.opname == "RETURN_CONST"
                else previous.argval
                if previous is not None and previous.opname.startswith("LOAD_CONST")
                else None
            )
            if constant is not None and type(constant) is type(returned) and constant == returned:
                matching.append(line)
        previous = instruction
    return sorted(set(matching or every))


def export_reconciler(reconcile: Callable[[Request], Action]) -> type:
    """The class componentize-py exports for the `reconciler` world: assign it to `WitWorld`
    in the app module (`WitWorld = export_reconciler(reconcile)`).

    Each call wraps the WIT request in a `Request`; whatever `reconcile` raises becomes the
    WIT `reconcile-error` with `describe(error)` as its message, so a bug (a `KeyError`) is a
    failed reconcile retried with backoff, not a trap.

    Mistakes that mean the component cannot reconcile at all are named instead of left to the
    runtime (whose words would be `KeyError(<class 'str'>)`): passing something that is not a
    function raises `TypeError` when the module is imported, so the build fails; a `reconcile`
    that returns anything but an action (`done()`, `requeue()`, `requeue_after(...)`) writes
    what it returned, and where the function is, to stderr (the host's log) and stops the call
    with that `TypeError`, a trap that `reconcile-host check` reports and a hot reload rolls
    back.
    """
    if not callable(reconcile):
        raise TypeError(
            f"export_reconciler takes the reconcile function, got {type(reconcile).__name__} "
            f"{reconcile!r:.60}; write `WitWorld = export_reconciler(reconcile)` after "
            "`def reconcile(request): ...`"
        )
    code = getattr(reconcile, "__code__", None)
    qualname = getattr(reconcile, "__qualname__", "reconcile")

    def where(returned: object) -> str:
        """The function, its file, and the line of the `return` that gave `returned`."""
        if code is None:
            return repr(reconcile)
        lines = _return_lines(code, returned)
        if len(lines) == 1:
            return f"{qualname} ({code.co_filename} line {lines[0]}, its `return`)"
        if lines:
            listed = ", ".join(map(str, lines))
            return f"{qualname} ({code.co_filename}, a `return` on line {listed})"
        return f"{qualname} ({code.co_filename} line {code.co_firstlineno})"

    class WitWorld:
        def reconcile(self, request: wit.Request) -> Action:
            try:
                action = reconcile(Request(request))
            except Exception as error:
                raise Err(wit.ReconcileError(message=describe(error))) from None
            finally:
                # Python buffers stdout: what is still in the buffer when the call returns
                # would be lost with the instance.
                sys.stdout.flush()
                sys.stderr.flush()
            if not isinstance(action, _ACTIONS):
                message = (
                    f"{where(action)} returned {type(action).__name__} ({action!r:.60}) where an Action "
                    "was expected; return done(), requeue() or requeue_after(seconds) from "
                    "reconcile_guest"
                )
                print(f"reconcile_guest: {message}", file=sys.stderr, flush=True)
                raise TypeError(message)
            return action

    WitWorld.__doc__ = reconcile.__doc__
    return WitWorld
