"""The API's object semantics over the store: create, read, update, patch and status.

This is what makes the sandbox behave like an API server rather than a key-value store:
system metadata (uid, creationTimestamp, resourceVersion, generation), optimistic
concurrency (409 on a stale resourceVersion), the status subresource split (the main
resource ignores status, `/status` ignores everything else), `metadata.generation` bumped
only when something besides metadata and status changes, schema admission of custom
resources, and no write at all for an update that changes nothing (as the real server, so
controllers that patch idempotently do not wake themselves up). Deletion, finalizers and
garbage collection live in `deleting.py`.

HTTP is not known here: the server, tests and in-process components (the planned process
kubelet) all call these methods on the server's event loop.
"""

from __future__ import annotations

import builtins
import copy
import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swivel_tools.sandbox import deleting, patching, strategies
from swivel_tools.sandbox.admission import DEFAULT_WRITE, WriteOptions, admit
from swivel_tools.sandbox.errors import (
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    method_not_allowed,
    not_found,
    unsupported_media_type,
)
from swivel_tools.sandbox.resources import CRD_KEY, NAMESPACE_KEY, Catalogue, Endpoint, from_crd
from swivel_tools.sandbox.selectors import field_selector, label_selector
from swivel_tools.sandbox.store import Store, Subscription

JsonObject = dict[str, Any]
Clock = Callable[[], datetime.datetime]
# The new object from the stored one; it returns a new object and leaves its argument alone
# (every patch flavour copies its target), so `_update` hands it the stored copy as is.
Change = Callable[[JsonObject], JsonObject]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Set by the server, never by a client's update.
SYSTEM_METADATA = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
)
CLIENT_IGNORED_ON_CREATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
    "managedFields",
    "selfLink",
)
NOT_FOUND_PATH = "the server could not find the requested resource"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class Written:
    """The result of a write: the object as stored, and warnings for the client."""

    object: JsonObject
    warnings: list[str] = field(default_factory=list)
    created: bool = False


class Registry:
    def __init__(
        self, store: Store | None = None, catalogue: Catalogue | None = None, clock: Clock = utc_now
    ) -> None:
        self.store = store or Store()
        self.catalogue = catalogue or Catalogue()
        self.clock = clock
        namespaces = self.catalogue.get(NAMESPACE_KEY)
        assert namespaces is not None
        for name in SYSTEM_NAMESPACES:
            self.create(Endpoint.of(namespaces), {"metadata": {"name": name}})

    def timestamp(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    def endpoint(self, group: str, version: str, plural: str, namespace: str = "") -> Endpoint:
        found = self.catalogue.lookup(group, version, plural)
        if found is None:
            raise ApiError(404, "NotFound", NOT_FOUND_PATH)
        return Endpoint(found, version, namespace)

    # Reading.

    def get(self, endpoint: Endpoint, name: str) -> JsonObject:
        found = self.store.get(endpoint.key, endpoint.scope, name)
        if found is None:
            raise not_found(endpoint.type.plural, endpoint.type.group, name)
        return endpoint.present(found)

    def list(
        self, endpoint: Endpoint, labels: str | None = None, fields: str | None = None
    ) -> tuple[builtins.list[JsonObject], int]:
        """Matching objects (all namespaces if none given) and this snapshot's version."""
        matches = self.selector(endpoint, labels, fields)
        items = self.store.list(endpoint.key, endpoint.scope or None, matches)
        return [endpoint.present(o) for o in items], self.store.resource_version

    def selector(
        self, endpoint: Endpoint, labels: str | None, fields: str | None
    ) -> Callable[[JsonObject], bool]:
        by_label = label_selector(labels)
        by_field = field_selector(
            fields, endpoint.type.field_labels + endpoint.served.selectable_fields
        )
        return lambda obj: by_label(obj) and by_field(obj)

    def watch(self, endpoint: Endpoint) -> Subscription:
        """Live events of one kind: the hook for in-process components (e.g. a kubelet)."""
        return self.store.subscribe(endpoint.key, endpoint.scope or None)

    # Creating.

    def create(
        self, endpoint: Endpoint, body: JsonObject, options: WriteOptions = DEFAULT_WRITE
    ) -> Written:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise bad_request("Object 'metadata' is missing or not an object")
        obj = copy.deepcopy(body)
        self._check_envelope(endpoint, obj)
        metadata = obj.setdefault("metadata", {})
        if endpoint.type.namespaced:
            if metadata.get("namespace", endpoint.namespace) != endpoint.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent"
                    " on the request"
                )
            metadata["namespace"] = endpoint.namespace
            self._check_namespace_accepts(endpoint.namespace)
        else:
            metadata.pop("namespace", None)
        if not metadata.get("name"):
            if not metadata.get("generateName"):
                cause = Cause(
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                )
                raise invalid(endpoint.type.kind, endpoint.type.group, "", [cause])
            metadata["name"] = strategies.generate_name(metadata["generateName"])
        name = metadata["name"]
        if self.store.get(endpoint.key, endpoint.scope, name) is not None:
            raise already_exists(endpoint.type.plural, endpoint.type.group, name)
        if self._is_terminating_crd_of(endpoint):
            raise method_not_allowed(
                "create not allowed while custom resource definition is terminating"
            )
        for key in CLIENT_IGNORED_ON_CREATE:
            metadata.pop(key, None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = self.timestamp()
        if endpoint.type.tracks_generation:
            metadata["generation"] = 1
        if endpoint.served.has_status:
            obj.pop("status", None)
        strategies.prepare_create(endpoint.type, obj)
        warnings = admit(endpoint, obj, options, strategies.name_causes(endpoint.type, name))
        strategies.prepare_write(endpoint.type, obj, self.timestamp())
        if options.dry_run:
            return Written(endpoint.present(obj), warnings, created=True)
        stored = self.store.write(endpoint.key, obj, "ADDED", owned=True)
        self._after_write(endpoint, stored)
        return Written(endpoint.present(stored), warnings, created=True)

    # Updating: PUT and PATCH share one path, with or without the status subresource.

    def replace(
        self,
        endpoint: Endpoint,
        name: str,
        body: JsonObject,
        *,
        subresource: str | None = None,
        options: WriteOptions = DEFAULT_WRITE,
    ) -> Written:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise bad_request("the body of an update must be an object")
        self._check_envelope(endpoint, body)
        metadata = body.get("metadata") or {}
        if metadata.get("name") and metadata["name"] != name:
            raise bad_request(
                f"the name of the object ({metadata['name']}) does not match the name on the"
                f" URL ({name})"
            )
        if endpoint.type.custom and not metadata.get("resourceVersion"):
            cause = Cause(
                "metadata.resourceVersion",
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
            )
            raise invalid(endpoint.type.kind, endpoint.type.group, name, [cause])
        return self._update(endpoint, name, lambda _: copy.deepcopy(body), subresource, options)

    def patch(
        self,
        endpoint: Endpoint,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        options: WriteOptions = DEFAULT_WRITE,
    ) -> Written:
        change: Change
        if content_type == patching.MERGE_PATCH:
            change = lambda old: patching.merge_patch(old, patch)  # noqa: E731
        elif content_type == patching.JSON_PATCH:
            change = lambda old: patching.json_patch(old, patch)  # noqa: E731
        elif content_type == patching.STRATEGIC_MERGE_PATCH and not endpoint.type.custom:
            change = lambda old: patching.strategic_merge_patch(old, patch)  # noqa: E731
        elif content_type == patching.APPLY_PATCH:
            return self._apply(endpoint, name, patch, subresource, options)
        else:
            accepted = [patching.JSON_PATCH, patching.MERGE_PATCH, patching.APPLY_PATCH]
            if not endpoint.type.custom:
                accepted.insert(2, patching.STRATEGIC_MERGE_PATCH)
            raise unsupported_media_type(content_type, accepted)
        return self._update(endpoint, name, change, subresource, options)

    def _apply(
        self,
        endpoint: Endpoint,
        name: str,
        body: Any,
        subresource: str | None,
        options: WriteOptions,
    ) -> Written:
        """Server-side apply, simplified: create if absent, else a merge patch (no ownership)."""
        if not isinstance(body, dict):
            raise bad_request("an apply patch must be an object")
        if subresource is None and self.store.get(endpoint.key, endpoint.scope, name) is None:
            return self.create(
                endpoint, patching.merge_patch(body, {"metadata": {"name": name}}), options
            )
        change: Change = lambda old: patching.merge_patch(old, body)  # noqa: E731
        return self._update(endpoint, name, change, subresource, options)

    def _update(
        self,
        endpoint: Endpoint,
        name: str,
        change: Change,
        subresource: str | None,
        options: WriteOptions,
    ) -> Written:
        if subresource not in (None, "status") or (
            subresource == "status" and not endpoint.served.has_status
        ):
            raise ApiError(404, "NotFound", NOT_FOUND_PATH)
        old = self.get(endpoint, name)
        new = change(old)
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise bad_request("the patched object is not a valid object")
        stale = new.setdefault("metadata", {}).get("resourceVersion")
        if stale and stale != old["metadata"]["resourceVersion"]:
            raise conflict(endpoint.type.plural, endpoint.type.group, name)
        new = self._keep_what_this_write_may_not_change(endpoint, old, new, subresource)
        warnings = admit(endpoint, new, options, self._finalizer_causes(old, new))
        if endpoint.type.tracks_generation and self._spec_changed(endpoint, old, new):
            new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
        strategies.prepare_write(endpoint.type, new, self.timestamp())
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return Written(old, warnings)  # nothing changed: no new version, no event
        if options.dry_run:
            return Written(new, warnings)
        if new["metadata"].get("deletionTimestamp") and self.finalizable(endpoint, new):
            return Written(endpoint.present(self.remove(endpoint, new)), warnings)
        stored = self.store.write(endpoint.key, new, "MODIFIED", owned=True)
        self._after_write(endpoint, stored)
        return Written(endpoint.present(stored), warnings)

    @staticmethod
    def _keep_what_this_write_may_not_change(
        endpoint: Endpoint, old: JsonObject, new: JsonObject, subresource: str | None
    ) -> JsonObject:
        if subresource == "status":
            kept = {k: copy.deepcopy(v) for k, v in old.items() if k != "status"}
            if new.get("status") is not None:
                kept["status"] = new["status"]
            return kept
        metadata = new["metadata"]
        for key in SYSTEM_METADATA:
            if key in old["metadata"]:
                metadata[key] = old["metadata"][key]
            else:
                metadata.pop(key, None)
        metadata.pop("managedFields", None)
        if endpoint.served.has_status:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        return new

    @staticmethod
    def _finalizer_causes(old: JsonObject, new: JsonObject) -> builtins.list[Cause]:
        before = set(old["metadata"].get("finalizers") or [])
        added = set(new["metadata"].get("finalizers") or []) - before
        if old["metadata"].get("deletionTimestamp") and added:
            message = "Forbidden: no new finalizers can be added if the object is being deleted"
            return [Cause("metadata.finalizers", "FieldValueForbidden", message)]
        return []

    # Deleting (see deleting.py).

    def delete(
        self,
        endpoint: Endpoint,
        name: str,
        options: JsonObject | None = None,
        *,
        dry_run: bool = False,
    ) -> JsonObject:
        return deleting.delete(self, endpoint, name, options or {}, dry_run=dry_run)

    def delete_collection(
        self,
        endpoint: Endpoint,
        labels: str | None = None,
        fields: str | None = None,
        options: JsonObject | None = None,
        *,
        dry_run: bool = False,
    ) -> JsonObject:
        return deleting.delete_collection(
            self, endpoint, labels, fields, options or {}, dry_run=dry_run
        )

    def finalizable(self, endpoint: Endpoint, obj: JsonObject) -> bool:
        return deleting.finalizable(self, endpoint, obj)

    def remove(self, endpoint: Endpoint, obj: JsonObject) -> JsonObject:
        return deleting.remove(self, endpoint, obj)

    # Shared checks.

    @staticmethod
    def _check_envelope(endpoint: Endpoint, obj: JsonObject) -> None:
        expected, kind = endpoint.api_version, endpoint.type.kind
        if obj.get("apiVersion", expected) != expected or obj.get("kind", kind) != kind:
            raise bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) or kind"
                f" ({obj.get('kind')}) does not match the expected {expected} {kind}"
            )
        obj["apiVersion"], obj["kind"] = expected, kind

    def _check_namespace_accepts(self, namespace: str) -> None:
        found = self.store.get(NAMESPACE_KEY, "", namespace)
        if found is None:
            raise not_found("namespaces", "", namespace)
        if found["metadata"].get("deletionTimestamp"):
            raise forbidden(
                f"unable to create new content in namespace {namespace} because it is being"
                " terminated"
            )

    def _is_terminating_crd_of(self, endpoint: Endpoint) -> bool:
        if not endpoint.type.custom:
            return False
        crd = self.store.get(CRD_KEY, "", f"{endpoint.type.plural}.{endpoint.type.group}")
        return crd is not None and bool(crd["metadata"].get("deletionTimestamp"))

    @staticmethod
    def _spec_changed(endpoint: Endpoint, old: JsonObject, new: JsonObject) -> bool:
        ignored = {"metadata", "apiVersion", "kind"}
        if endpoint.served.has_status:
            ignored.add("status")

        def essence(obj: JsonObject) -> JsonObject:
            return {k: v for k, v in obj.items() if k not in ignored}

        return essence(old) != essence(new)

    def _after_write(self, endpoint: Endpoint, stored: JsonObject) -> None:
        if endpoint.key == CRD_KEY:
            self.catalogue.register(from_crd(stored))
