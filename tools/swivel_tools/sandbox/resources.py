"""The kinds the sandbox serves: a fixed set of built-ins plus every CRD created at run time.

A `ResourceType` holds what discovery advertises and what the registry needs to apply the
right semantics (scope, status subresource, generation, the CRD schema per version).
Objects are stored once per (group, plural); the served versions share them, as with a CRD
whose conversion strategy is `None`: only `apiVersion` differs between versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]
ResourceKey = tuple[str, str]  # (group, plural)

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ServedVersion:
    """One version of a kind: its schema (CRDs only) and its subresources."""

    name: str
    schema: JsonObject | None = None
    has_status: bool = False
    printer_columns: tuple[JsonObject, ...] = ()
    selectable_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceType:
    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    versions: tuple[ServedVersion, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    custom: bool = False  # a CRD-defined kind: schema, pruning, no strategic merge patch
    tracks_generation: bool = False
    returns_deleted_object: bool = False  # DELETE answers with the object, not a Status
    field_labels: tuple[str, ...] = field(default=())  # fieldSelector keys besides metadata.*

    @property
    def key(self) -> ResourceKey:
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def version(self, name: str) -> ServedVersion | None:
        return next((v for v in self.versions if v.name == name), None)

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    status: bool = False,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    generation: bool = False,
    returns_object: bool = False,
    field_labels: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        versions=(ServedVersion(version, has_status=status),),
        short_names=short,
        categories=categories,
        tracks_generation=generation,
        returns_deleted_object=returns_object,
        field_labels=field_labels,
    )


_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
)

BUILTINS: tuple[ResourceType, ...] = (
    _builtin("", "v1", "namespaces", "Namespace", namespaced=False, status=True, short=("ns",),
             returns_object=True, field_labels=("status.phase",)),
    _builtin("", "v1", "pods", "Pod", status=True, short=("po",), categories=("all",),
             returns_object=True, field_labels=_POD_FIELDS),
    _builtin("", "v1", "services", "Service", status=True, short=("svc",), categories=("all",)),
    _builtin("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _builtin("", "v1", "secrets", "Secret", field_labels=("type",)),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",)),
    _builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", status=True,
             short=("pvc",), returns_object=True),
    _builtin("", "v1", "events", "Event", short=("ev",), field_labels=_EVENT_FIELDS),
    _builtin("events.k8s.io", "v1", "events", "Event", short=("ev",)),
    _builtin("apps", "v1", "deployments", "Deployment", status=True, short=("deploy",),
             categories=("all",), generation=True, returns_object=True),
    _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease"),
    _builtin("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    _builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions",
             "CustomResourceDefinition", namespaced=False, status=True, short=("crd", "crds"),
             categories=("api-extensions",), generation=True, returns_object=True),
)  # fmt: skip

CRD_KEY: ResourceKey = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE_KEY: ResourceKey = ("", "namespaces")


def from_crd(crd: JsonObject) -> ResourceType:
    """The served kind a CRD object describes (only its served versions)."""
    spec = crd["spec"]
    names = spec["names"]
    versions = tuple(
        ServedVersion(
            name=v["name"],
            schema=(v.get("schema") or {}).get("openAPIV3Schema"),
            has_status="status" in (v.get("subresources") or {}),
            printer_columns=tuple(v.get("additionalPrinterColumns") or ()),
            selectable_fields=tuple(
                f["jsonPath"].lstrip(".") for f in v.get("selectableFields") or ()
            ),
        )
        for v in spec.get("versions", [])
        if v.get("served", True)
    )
    return ResourceType(
        group=spec["group"],
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        versions=versions,
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        custom=True,
        tracks_generation=True,
        returns_deleted_object=True,
    )


class Catalogue:
    """Which kinds are served right now; CRDs come and go with their objects."""

    def __init__(self) -> None:
        self._types: dict[ResourceKey, ResourceType] = {t.key: t for t in BUILTINS}

    def register(self, resource_type: ResourceType) -> None:
        self._types[resource_type.key] = resource_type

    def unregister(self, key: ResourceKey) -> None:
        if key in self._types and self._types[key].custom:
            del self._types[key]

    def get(self, key: ResourceKey) -> ResourceType | None:
        return self._types.get(key)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        found = self._types.get((group, plural))
        return found if found is not None and found.version(version) is not None else None

    def all(self) -> list[ResourceType]:
        return list(self._types.values())

    def groups(self) -> dict[str, list[str]]:
        """Group name → served versions, preferred first (Kubernetes' version priority)."""
        found: dict[str, set[str]] = {}
        for resource_type in self._types.values():
            if resource_type.group:
                found.setdefault(resource_type.group, set()).update(
                    v.name for v in resource_type.versions
                )
        return {group: sorted(names, key=version_priority) for group, names in found.items()}


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(name: str) -> tuple[int, int, int, str]:
    """Sort key: GA before beta before alpha, higher numbers first, others last by name."""
    match = _KUBE_VERSION.match(name)
    if match is None:
        return (3, 0, 0, name)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), name)


@dataclass(frozen=True)
class Endpoint:
    """One kind seen through one served version, in one namespace.

    The namespace is "" for cluster-scoped kinds and, when listing or watching a
    namespaced kind, for "all namespaces" (as a URL without `/namespaces/{ns}`).
    """

    type: ResourceType
    version: str
    namespace: str = ""

    @property
    def key(self) -> ResourceKey:
        return self.type.key

    @property
    def scope(self) -> str:
        return self.namespace if self.type.namespaced else ""

    @property
    def served(self) -> ServedVersion:
        found = self.type.version(self.version)
        assert found is not None, f"{self.version} is not served for {self.type.plural}"
        return found

    @property
    def api_version(self) -> str:
        return self.type.api_version(self.version)

    def present(self, obj: JsonObject) -> JsonObject:
        """The object as seen through this version (no conversion: only apiVersion)."""
        shown: JsonObject = {"apiVersion": self.api_version, "kind": self.type.kind}
        shown.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
        return shown

    def elsewhere(self, namespace: str) -> Endpoint:
        return Endpoint(self.type, self.version, namespace)

    @staticmethod
    def of(resource_type: ResourceType, namespace: str = "") -> Endpoint:
        """The kind through its first served version (for the server's own writes)."""
        return Endpoint(resource_type, resource_type.versions[0].name, namespace)
