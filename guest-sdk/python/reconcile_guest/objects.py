"""`Kind` and `ObjectRef`: which kind, and which object, a call is about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wit_world.imports import types as wit

from .errors import ReconcileError


@dataclass(frozen=True)
class Kind:
    """A Kubernetes kind: `Kind("apps/v1", "Deployment")`; `str()` is `apps/v1 Deployment`."""

    #: `group/version`, or just `version` for the core group: `v1`, `apps/v1`.
    api_version: str
    #: The kind's name: `ConfigMap`.
    kind: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Kind:
        """The kind of an object in JSON form (its `apiVersion` and `kind`)."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise ReconcileError("the object has no string `apiVersion` and `kind`")
        return cls(api_version, kind)

    @property
    def group(self) -> str:
        """The API group: `apps` for `apps/v1`, `""` for the core group."""
        return self.api_version.rpartition("/")[0]

    def to_wit(self) -> wit.Kind:
        """The WIT record, for the generated bindings."""
        return wit.Kind(api_version=self.api_version, kind=self.kind)

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


@dataclass(frozen=True)
class ObjectRef:
    """One object: its kind, namespace (`None` for cluster-scoped kinds) and name;
    `str()` is `v1 ConfigMap default/settings`."""

    kind: Kind
    namespace: str | None
    name: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ObjectRef:
        """The reference of an object in JSON form, from `apiVersion`, `kind`, `metadata.name`
        and `metadata.namespace` (absent for cluster-scoped objects)."""
        metadata = obj.get("metadata") or {}
        name = metadata.get("name")
        if not isinstance(name, str):
            raise ReconcileError("the object has no string `metadata.name`")
        return cls(Kind.of(obj), metadata.get("namespace"), name)

    @classmethod
    def from_wit(cls, ref: wit.ObjectRef) -> ObjectRef:
        """The reference the host sent, as a WIT record."""
        return cls(Kind(ref.kind.api_version, ref.kind.kind), ref.namespace, ref.name)

    def with_name(self, name: str) -> ObjectRef:
        """The object of the same kind and namespace called `name`."""
        return ObjectRef(self.kind, self.namespace, name)

    def to_wit(self) -> wit.ObjectRef:
        """The WIT record, for the generated bindings."""
        return wit.ObjectRef(kind=self.kind.to_wit(), namespace=self.namespace, name=self.name)

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace is not None else self.name
        return f"{self.kind} {where}"
