"""Errors: typed exceptions for the host's `call-error`, and the text a failed reconcile reports."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Callable, TypeVar

from componentize_py_types import Err

from wit_world.imports import types as wit

T = TypeVar("T")


class ReconcileError(Exception):
    """A failed reconcile, in words: `raise ReconcileError("failed to copy to team-a") from error`.

    Any exception that leaves `reconcile` fails the reconcile the same way; this one exists for
    messages of your own. The host logs the whole chain of causes (`raise ... from ...`) and
    retries the key with backoff.
    """


class CallError(Exception):
    """A call to a host import failed: the WIT `call-error`.

    `str(error)` says what was being done, what went wrong and the host's message:
    `failed to apply v1 ConfigMap team-a/settings: the API server refused the call (409
    Conflict): ...`. Catch a subclass to handle one case: `except NotFoundError:`.
    """

    #: What this kind of failure means, in words.
    meaning = "the host call failed"

    def __init__(self, doing: str, detail: str) -> None:
        super().__init__(f"{doing}: {self.meaning}: {detail}")
        #: What was being done: `failed to apply v1 ConfigMap team-a/settings`.
        self.doing = doing
        #: The host's message (the API server's, for an `ApiError`).
        self.detail = detail


class DeniedError(CallError):
    """The plugin may not make the call: its manifest's grants do not allow it (the API server
    was not contacted), or the ServiceAccount it acts as may not (the API server's 403, or its
    RBAC refusing a cached read). The detail says which, and what is missing."""

    meaning = "the plugin may not make the call"


class InvalidError(CallError):
    """The host refused malformed arguments (bad JSON, no `apiVersion`/`kind`/`metadata.name`,
    a bad label selector, a kind the API server does not serve); the API server was not
    contacted."""

    meaning = "the host refused malformed arguments"


class UnavailableError(CallError):
    """The API server could not be reached or did not answer in time."""

    meaning = "the API server could not be reached"


class ApiError(CallError):
    """The API server refused the call: its HTTP status `code`, its `reason` (`NotFound`,
    `Conflict`, `Invalid`, ...) and its message in `detail`."""

    def __init__(self, doing: str, code: int, reason: str, detail: str) -> None:
        self.meaning = f"the API server refused the call ({code} {reason})"
        super().__init__(doing, detail)
        self.code = code
        self.reason = reason


class NotFoundError(ApiError):
    """The API server answered 404: the object (or, for a write, its namespace) does not exist."""


class ConflictError(ApiError):
    """The API server answered 409: the object exists already, or changed since it was read."""


_BY_CASE: dict[type, type[CallError]] = {
    wit.CallError_Denied: DeniedError,
    wit.CallError_Invalid: InvalidError,
    wit.CallError_Unavailable: UnavailableError,
}


def call_error(doing: str, error: wit.CallError) -> CallError:
    """The typed exception for the WIT `call-error` a host call answered; `doing` says what the
    call was for (`failed to delete v1 ConfigMap team-a/settings`)."""
    if isinstance(error, wit.CallError_Api):
        status = error.value
        cls = {404: NotFoundError, 409: ConflictError}.get(status.code, ApiError)
        return cls(doing, status.code, status.reason, status.message)
    return _BY_CASE[type(error)](doing, error.value)


def describe(error: BaseException) -> str:
    """The message of `error` and of each cause (`raise ... from cause`), outermost first, joined
    with ": " — what the host logs for a failed reconcile. An exception that is not a
    `ReconcileError` or a `CallError` (a bug, such as a `KeyError`) is named with its type and
    where it was raised: `KeyError: 'data' (replicator.py:42 in copy)`.
    """
    parts = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ReconcileError, CallError)):
            parts.append(str(current))
        else:
            text = type(current).__name__
            if str(current):
                text += f": {current}"
            where = _raised_at(current.__traceback__)
            parts.append(f"{text} ({where})" if where else text)
        current = current.__cause__
    return ": ".join(parts)


def _raised_at(traceback: TracebackType | None) -> str:
    """`file.py:line in function` of the innermost frame (without reading the source file,
    which a guest cannot open)."""
    if traceback is None:
        return ""
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    code = traceback.tb_frame.f_code
    file = code.co_filename.rsplit("/", 1)[-1]
    return f"{file}:{traceback.tb_lineno} in {code.co_name}"


def call_host(doing: str, function: Callable[..., T], *args: Any) -> T:
    """Calls the generated import `function` with `args`; a `call-error` it answers is raised as
    the typed `CallError`, its text starting with `doing`."""
    try:
        return function(*args)
    except Err as error:
        raise call_error(doing, error.value) from None
