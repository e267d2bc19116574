"""Reads from the host's informer caches: no API round trip, and only the kinds the manifest
lists (`for`, `owns` and `cache`). The cache may be a moment behind the API server."""

from __future__ import annotations

import json
from typing import Any

from wit_world.imports import cache as host

from .errors import call_host
from .objects import Kind


def get(kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
    """The cached object `name` of `kind` in `namespace` (`None` for cluster-scoped kinds),
    parsed; `None` if the cache does not hold it. Raises `DeniedError` for a kind the manifest
    does not cache."""
    where = f"{kind} {namespace}/{name}" if namespace is not None else f"{kind} {name}"
    doing = f"failed to read {where} from the cache"
    text = call_host(doing, host.get, kind.to_wit(), namespace, name)
    return None if text is None else json.loads(text)


def list(  # noqa: A001 - the WIT function's name
    kind: Kind, namespace: str | None = None, selector: str | None = None
) -> list[dict[str, Any]]:
    """Every cached object of `kind`, in `namespace` only if given, matching the label
    `selector` if given (`app=web,tier!=db,env in (a,b),!legacy`), parsed, ordered by namespace
    and name."""
    doing = f"failed to list {kind} from the cache"
    texts = call_host(doing, host.list, kind.to_wit(), namespace, selector)
    return [json.loads(text) for text in texts]
