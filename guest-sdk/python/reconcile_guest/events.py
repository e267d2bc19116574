"""Kubernetes Events about objects, as `kubectl describe` shows them. No grant is needed."""

from __future__ import annotations

from wit_world.imports import events as host
from wit_world.imports.events import EventType

from .errors import call_host
from .objects import ObjectRef

__all__ = ["EventType", "record"]


def record(regarding: ObjectRef, event_type: EventType, reason: str, note: str) -> None:
    """Records an event about `regarding`: `EventType.NORMAL` or `EventType.WARNING`, `reason` a
    short UpperCamelCase word (`"Synced"`), `note` a sentence (at most 1 KB is kept). The host
    sets the reporting controller to `reconcile-host/<plugin>`."""
    call_host(
        f"failed to record event {reason} about {regarding}",
        host.record_event,
        regarding.to_wit(),
        event_type,
        reason,
        note,
    )
