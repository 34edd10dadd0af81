"""What differs per kind on create and update, in the spirit of the API server's strategies.

Kept apart from the registry so that the generic flow reads straight through: names are
validated, the initial status of namespaces and pods is set, and a CRD gets the status the
real apiextensions controller writes (names accepted, established) at once.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from swivel_tools.sandbox.errors import Cause
from swivel_tools.sandbox.resources import CRD_KEY, NAMESPACE_KEY, ResourceType

JsonObject = dict[str, Any]

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
NAMESPACE_FINALIZER = "kubernetes"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as the API server's name generator


def generate_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))


def name_causes(resource_type: ResourceType, name: str) -> list[Cause]:
    """The real server's name rules: DNS labels for namespaces, path segments for RBAC."""
    if resource_type.group == "rbac.authorization.k8s.io":
        if name in (".", "..") or "/" in name or "%" in name:
            return [
                Cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": may not contain "/" or "%"',
                )
            ]
        return []
    if resource_type.key == NAMESPACE_KEY:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [
                Cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower'
                    " case alphanumeric characters or '-', and must start and end with an"
                    " alphanumeric character",
                )
            ]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return [
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower'
                " case alphanumeric characters, '-' or '.', and must start and end with an"
                " alphanumeric character",
            )
        ]
    return []


def prepare_create(resource_type: ResourceType, obj: JsonObject) -> None:
    """Initial state the server (not the client) decides."""
    if resource_type.key == NAMESPACE_KEY:
        obj.setdefault("spec", {})["finalizers"] = [NAMESPACE_FINALIZER]
        obj["status"] = {"phase": "Active"}
    elif resource_type.key in (("", "pods"), ("", "persistentvolumeclaims")):
        obj["status"] = {"phase": "Pending"}  # a claim waits for the kubelet to bind it
    elif resource_type.key == CRD_KEY:
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)


def prepare_write(resource_type: ResourceType, obj: JsonObject, now: str) -> None:
    """State recomputed on every write (CRD status follows its spec)."""
    if resource_type.key == CRD_KEY:
        spec = obj.get("spec") or {}
        conditions = [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ]  # fmt: skip
        if obj["metadata"].get("deletionTimestamp"):
            conditions.append(
                {"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
                 "message": "CustomResource deletion is in progress", "lastTransitionTime": now}
            )  # fmt: skip
        old_status = obj.get("status") or {}
        old_times = {
            c.get("type"): c.get("lastTransitionTime") for c in old_status.get("conditions") or []
        }
        for condition in conditions:
            condition["lastTransitionTime"] = old_times.get(condition["type"]) or now
        storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
        obj["status"] = {
            "acceptedNames": spec.get("names") or {},
            "conditions": conditions,
            "storedVersions": sorted(set(old_status.get("storedVersions") or []) | set(storage)),
        }


def crd_causes(crd: JsonObject) -> list[Cause]:
    """The few CRD rules that would otherwise break serving: names and one storage version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes = []
    for field in ("plural", "kind"):
        if not names.get(field):
            causes.append(Cause(f"spec.names.{field}", "FieldValueRequired", "Required value"))
    if not spec.get("group"):
        causes.append(Cause("spec.group", "FieldValueRequired", "Required value"))
    expected = f"{names.get('plural')}.{spec.get('group')}"
    if not causes and crd["metadata"].get("name") != expected:
        causes.append(
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{crd["metadata"].get("name")}": must be spec.names.plural+"."+spec.group',
            )
        )
    versions = spec.get("versions") or []
    if sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            Cause(
                "spec.versions",
                "FieldValueInvalid",
                "must have exactly one version marked as storage version",
            )
        )
    if spec.get("scope", "Namespaced") not in ("Namespaced", "Cluster"):
        causes.append(
            Cause(
                "spec.scope", "FieldValueNotSupported", f'Unsupported value: "{spec.get("scope")}"'
            )
        )
    return causes
