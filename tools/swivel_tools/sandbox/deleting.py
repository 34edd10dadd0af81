"""Deletion as the API server and its built-in controllers carry it out.

- An object with finalizers is only marked (`deletionTimestamp`, one MODIFIED event) and
  goes away when an update empties its finalizers (one DELETED event).
- Garbage collection: once an owner is gone, dependents whose owners are all gone are
  deleted in turn (background propagation; `Foreground` is treated the same way;
  `Orphan` strips the owner reference instead).
- A namespace becomes `Terminating`, its contents are deleted, and it disappears once
  empty; a CRD stops accepting new objects, its objects are deleted, and it disappears
  (and stops being served) once none remain.
- A pod bound to a node (`spec.nodeName`) is deleted gracefully: it stays, marked, until
  its kubelet confirms with `gracePeriodSeconds=0`. Nothing binds pods yet; this is the
  contract the planned process kubelet will honour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swivel_tools.sandbox import strategies
from swivel_tools.sandbox.errors import ApiError, bad_request, forbidden
from swivel_tools.sandbox.resources import CRD_KEY, NAMESPACE_KEY, Endpoint, ResourceType, from_crd

if TYPE_CHECKING:
    from swivel_tools.sandbox.registry import Registry

JsonObject = dict[str, Any]
PODS = ("", "pods")
DEFAULT_POD_GRACE_SECONDS = 30
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")


def delete(
    registry: Registry, endpoint: Endpoint, name: str, options: JsonObject, *, dry_run: bool
) -> JsonObject:
    """DELETE of one object; the answer is the object or a `Success` Status, per kind."""
    obj = registry.get(endpoint, name)
    _check_preconditions(endpoint, obj, options)
    if endpoint.key == NAMESPACE_KEY and name in UNDELETABLE_NAMESPACES:
        raise forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
    if dry_run:
        return endpoint.present(obj)
    metadata = obj["metadata"]
    grace = _pod_grace(endpoint, obj, options)
    if metadata.get("deletionTimestamp"):
        if endpoint.key == PODS and grace == 0 and metadata.get("deletionGracePeriodSeconds"):
            metadata["deletionGracePeriodSeconds"] = 0  # the kubelet confirms the pod stopped
            if registry.finalizable(endpoint, obj):
                return _answer(registry, endpoint, remove(registry, endpoint, obj))
            obj = registry.store.write(endpoint.key, obj, "MODIFIED")
        return _answer(registry, endpoint, obj)
    if _propagation(options) == "Orphan":
        _orphan_dependents(registry, metadata["uid"])
    if metadata.get("finalizers") or grace or endpoint.key == NAMESPACE_KEY:
        return _answer(registry, endpoint, _mark_terminating(registry, endpoint, obj, grace))
    return _answer(registry, endpoint, remove(registry, endpoint, obj))


def _mark_terminating(
    registry: Registry, endpoint: Endpoint, obj: JsonObject, grace: int
) -> JsonObject:
    obj["metadata"]["deletionTimestamp"] = registry.timestamp()
    obj["metadata"]["deletionGracePeriodSeconds"] = grace
    if endpoint.key == NAMESPACE_KEY:
        obj["status"] = {"phase": "Terminating"}
    strategies.prepare_write(endpoint.type, obj, registry.timestamp())
    marked = registry.store.write(endpoint.key, obj, "MODIFIED")
    if endpoint.key == NAMESPACE_KEY:
        _empty_namespace(registry, marked["metadata"]["name"])
    elif endpoint.key == CRD_KEY:
        _empty_crd(registry, marked)
    name, namespace = marked["metadata"]["name"], marked["metadata"].get("namespace", "")
    return registry.store.get(endpoint.key, namespace, name) or marked


def delete_collection(
    registry: Registry,
    endpoint: Endpoint,
    labels: str | None,
    fields: str | None,
    options: JsonObject,
    *,
    dry_run: bool,
) -> JsonObject:
    items, _ = registry.list(endpoint, labels, fields)
    answers = []
    for obj in items:
        where = endpoint.elsewhere(obj["metadata"].get("namespace", ""))
        answer = _delete_if_present(registry, where, obj["metadata"]["name"], options, dry_run)
        if answer is not None and answer.get("kind") != "Status":
            answers.append(answer)
    return {
        "apiVersion": endpoint.api_version,
        "kind": endpoint.type.list_kind,
        "metadata": {"resourceVersion": str(registry.store.resource_version)},
        "items": answers,
    }


def finalizable(registry: Registry, endpoint: Endpoint, obj: JsonObject) -> bool:
    """May a terminating object go now? No finalizers, and nothing left it must outlive."""
    metadata = obj["metadata"]
    if metadata.get("finalizers"):
        return False
    if endpoint.key == PODS and metadata.get("deletionGracePeriodSeconds"):
        return False  # waits for its kubelet
    if endpoint.key == NAMESPACE_KEY:
        return not any(True for _ in registry.store.in_namespace(metadata["name"]))
    return True


def remove(registry: Registry, endpoint: Endpoint, obj: JsonObject) -> JsonObject:
    """Drop the object for good (DELETED event) and settle whatever waited for it."""
    gone = registry.store.write(endpoint.key, obj, "DELETED")
    if endpoint.key == CRD_KEY:
        registry.catalogue.unregister(from_crd(gone).key)
    _collect_dependents(registry, gone["metadata"]["uid"])
    if endpoint.type.namespaced:
        _settle_namespace(registry, gone["metadata"]["namespace"])
    if endpoint.type.custom:
        _settle_crd(registry, endpoint.type)
    return gone


def _delete_if_present(
    registry: Registry, endpoint: Endpoint, name: str, options: JsonObject, dry_run: bool = False
) -> JsonObject | None:
    """Delete unless already gone (garbage collection may have been faster)."""
    try:
        return delete(registry, endpoint, name, options, dry_run=dry_run)
    except ApiError as error:
        if error.code == 404:
            return None
        raise


def _answer(registry: Registry, endpoint: Endpoint, obj: JsonObject) -> JsonObject:
    """The object while it still exists (or for kinds that return it), else a Status."""
    metadata = obj["metadata"]
    present = registry.store.get(endpoint.key, metadata.get("namespace", ""), metadata["name"])
    if present is not None or endpoint.type.returns_deleted_object:
        return endpoint.present(obj)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": metadata["name"],
            "group": endpoint.type.group,
            "kind": endpoint.type.plural,
            "uid": metadata["uid"],
        },
    }


def _check_preconditions(endpoint: Endpoint, obj: JsonObject, options: JsonObject) -> None:
    preconditions = options.get("preconditions") or {}
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted, actual = preconditions.get(field), obj["metadata"].get(field)
        if wanted and wanted != actual:
            what = endpoint.type.plural + (f".{endpoint.type.group}" if endpoint.type.group else "")
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {what} "{obj["metadata"]["name"]}":'
                f" Precondition failed: {label} in precondition: {wanted},"
                f" {label} in object meta: {actual}",
            )


def _propagation(options: JsonObject) -> str:
    policy = options.get("propagationPolicy")
    if policy is None and options.get("orphanDependents") is True:
        policy = "Orphan"
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise bad_request(f"Unsupported propagation policy: {policy}")
    return policy or "Background"


def _pod_grace(endpoint: Endpoint, obj: JsonObject, options: JsonObject) -> int:
    spec = obj.get("spec") or {}
    if endpoint.key != PODS or not spec.get("nodeName"):
        return 0
    requested = options.get("gracePeriodSeconds")
    if requested is None:
        requested = spec.get("terminationGracePeriodSeconds", DEFAULT_POD_GRACE_SECONDS)
    return max(int(requested), 0)


def _dependents(registry: Registry, owner_uid: str) -> list[tuple[ResourceType, JsonObject]]:
    found = []
    for key, obj in registry.store.owned_by(owner_uid):
        resource_type = registry.catalogue.get(key)
        if resource_type is not None:
            found.append((resource_type, obj))
    return found


def _collect_dependents(registry: Registry, owner_uid: str) -> None:
    for resource_type, obj in _dependents(registry, owner_uid):
        owners = {str(ref.get("uid")) for ref in obj["metadata"].get("ownerReferences") or []}
        if not any(registry.store.has_uid(uid) for uid in owners):
            where = Endpoint.of(resource_type, obj["metadata"].get("namespace", ""))
            _delete_if_present(registry, where, obj["metadata"]["name"], {})


def _orphan_dependents(registry: Registry, owner_uid: str) -> None:
    for resource_type, obj in _dependents(registry, owner_uid):
        metadata = obj["metadata"]
        metadata["ownerReferences"] = [
            ref for ref in metadata["ownerReferences"] if ref.get("uid") != owner_uid
        ]
        if not metadata["ownerReferences"]:
            del metadata["ownerReferences"]
        registry.store.write(resource_type.key, obj, "MODIFIED")


def _empty_namespace(registry: Registry, namespace: str) -> None:
    for key, obj in list(registry.store.in_namespace(namespace)):
        resource_type = registry.catalogue.get(key)
        if resource_type is not None and not obj["metadata"].get("deletionTimestamp"):
            where = Endpoint.of(resource_type, namespace)
            _delete_if_present(registry, where, obj["metadata"]["name"], {})
    _settle_namespace(registry, namespace)


def _settle_namespace(registry: Registry, namespace: str) -> None:
    if not registry.store.is_terminating(NAMESPACE_KEY, "", namespace):
        return
    found = registry.store.get(NAMESPACE_KEY, "", namespace)
    namespaces = registry.catalogue.get(NAMESPACE_KEY)
    if found is None or namespaces is None:
        return
    endpoint = Endpoint.of(namespaces)
    if finalizable(registry, endpoint, found):
        remove(registry, endpoint, found)


def _empty_crd(registry: Registry, crd: JsonObject) -> None:
    resource_type = registry.catalogue.get(from_crd(crd).key)
    if resource_type is None:
        return
    for obj in registry.store.list(resource_type.key):
        if not obj["metadata"].get("deletionTimestamp"):
            where = Endpoint.of(resource_type, obj["metadata"].get("namespace", ""))
            _delete_if_present(registry, where, obj["metadata"]["name"], {})
    _settle_crd(registry, resource_type)


def _settle_crd(registry: Registry, resource_type: ResourceType) -> None:
    """Once a terminating CRD has no objects left, drop its cleanup finalizer (and it)."""
    crd_name = f"{resource_type.plural}.{resource_type.group}"
    if not registry.store.is_terminating(CRD_KEY, "", crd_name):
        return
    crd = registry.store.get(CRD_KEY, "", crd_name)
    crds = registry.catalogue.get(CRD_KEY)
    if crd is None or crds is None or registry.store.count(resource_type.key):
        return
    metadata = crd["metadata"]
    metadata["finalizers"] = [
        f for f in metadata.get("finalizers") or [] if f != strategies.CRD_CLEANUP_FINALIZER
    ]
    if metadata["finalizers"]:
        registry.store.write(CRD_KEY, crd, "MODIFIED")
        return
    del metadata["finalizers"]
    remove(registry, Endpoint.of(crds), crd)
