"""`Cluster`: the operator's narrow door to the Kubernetes API, plus the clock.

kopf watches and patches the objects a handler is called for; everything else (children,
sibling Reconfigurations, the status of another object, writes that must land before the
handler returns) goes through a `Cluster`. `KubernetesCluster` is the real one, over the
`kubernetes` client's generic `call_api` (in a thread, so the loop never blocks), for the
fixed set of kinds the operator touches.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client

Manifest = dict[str, Any]
Clock = Callable[[], datetime]

PLURALS = {
    "Pod": "pods",
    "Service": "services",
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "NetworkPolicy": "networkpolicies",
    "StreamJob": "streamjobs",
    "Reconfiguration": "reconfigurations",
}


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Ref:
    api_version: str
    kind: str
    namespace: str
    name: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ref:
        metadata = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], metadata["namespace"], metadata.get("name", ""))

    def path(self, subresource: str = "") -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        path = f"{base}/namespaces/{self.namespace}/{PLURALS[self.kind]}"
        if self.name:
            path += f"/{self.name}"
        return path + (f"/{subresource}" if subresource else "")


class ApiFailure(Exception):  # noqa: N818 - kopf and kubernetes spell it so too
    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status, self.reason = status, reason
        super().__init__(f"{status} {reason}: {message}")


class Cluster(Protocol):
    async def get(self, ref: Ref) -> Manifest | None: ...

    async def create(self, obj: Manifest) -> Manifest:
        """ApiFailure(409, "AlreadyExists") when it exists."""
        ...

    async def patch(self, ref: Ref, patch: Manifest, *, status: bool = False) -> Manifest:
        """A JSON merge patch of the object (or of its status subresource)."""
        ...

    async def delete(self, ref: Ref) -> bool:
        """True if something was deleted (or marked), False if it was already gone."""
        ...

    async def list(self, ref: Ref, labels: Mapping[str, str] | None = None) -> list[Manifest]: ...


class KubernetesCluster:
    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    async def _call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        return await asyncio.to_thread(self._call_sync, method, path, body, query)

    def _call_sync(self, method: str, path: str, body: Any, query: Mapping[str, str]) -> Any:
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        method_, url, headers, serialized, post = self._api.param_serialize(
            method,
            path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(method_, url, headers, serialized, post)
        except client.ApiException as error:
            raise _failure(int(error.status or 0), str(error.reason), error.body) from None
        data = response.read()  # type: ignore[no-untyped-call]
        if response.status >= 400:
            raise _failure(response.status, str(response.reason), data)
        return json.loads(data or b"null")

    async def get(self, ref: Ref) -> Manifest | None:
        try:
            found: Manifest = await self._call("GET", ref.path())
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise
        return found

    async def create(self, obj: Manifest) -> Manifest:
        created: Manifest = await self._call("POST", Ref.of(obj).path().rsplit("/", 1)[0], obj)
        return created

    async def patch(self, ref: Ref, patch: Manifest, *, status: bool = False) -> Manifest:
        patched: Manifest = await self._call("PATCH", ref.path("status" if status else ""), patch)
        return patched

    async def delete(self, ref: Ref) -> bool:
        try:
            await self._call("DELETE", ref.path(), {"propagationPolicy": "Background"})
        except ApiFailure as failure:
            if failure.status == 404:
                return False
            raise
        return True

    async def list(self, ref: Ref, labels: Mapping[str, str] | None = None) -> list[Manifest]:
        query = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels else {}
        listing = await self._call("GET", ref.path(), **query)
        kind = ref.kind
        items: list[Manifest] = listing.get("items", [])
        for item in items:  # list items carry no apiVersion/kind
            item.setdefault("apiVersion", ref.api_version)
            item.setdefault("kind", kind)
        return items


def _failure(code: int, reason: str, body: bytes | str | None) -> ApiFailure:
    try:
        status = json.loads(body or "{}")
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    return ApiFailure(code, str(status.get("reason", reason)), str(status.get("message", "")))
