"""Just enough OpenAPI v3 for kubectl: `/openapi/v3` and one document per group/version.

`kubectl apply` (and `create`, `replace`) validate by default; before sending
`?fieldValidation=Strict` kubectl looks in the server's OpenAPI v3 document for a PATCH
operation of the kind that lists that query parameter, and without an OpenAPI document at
all it refuses to proceed ("failed to download openapi"). So each kind gets its paths with
the `x-kubernetes-group-version-kind` extension and the `fieldValidation` parameter, and
custom kinds also get their CRD schema (which makes `kubectl explain streamjob.spec` work).
Built-in kinds carry no schema: kubectl then uses its own compiled-in types for strategic
merge patches. `/openapi/v2` stays 404 (kubectl only asks for it as a fallback).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from swivel_tools.sandbox.resources import Catalogue, ResourceType

JsonObject = dict[str, Any]

_QUERY_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _served_group_versions(catalogue: Catalogue) -> set[tuple[str, str]]:
    return {(t.group, v.name) for t in catalogue.all() for v in t.versions}


def _document(catalogue: Catalogue, group: str, version: str) -> JsonObject:
    types = [t for t in catalogue.all() if t.group == group and t.version(version)]
    paths: JsonObject = {}
    schemas: JsonObject = {}
    for resource_type in sorted(types, key=lambda t: t.plural):
        paths.update(_paths(resource_type, group, version))
        served = resource_type.version(version)
        if served is not None and served.schema is not None:
            schemas[_schema_name(resource_type, version)] = {
                **served.schema,
                "x-kubernetes-group-version-kind": [_gvk(resource_type, version)],
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (swivel sandbox)", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def root(catalogue: Catalogue) -> JsonObject:
    """`/openapi/v3`: where each group/version's document lives (hash = content digest)."""
    entries = {}
    for group, version in sorted(_served_group_versions(catalogue)):
        prefix = _prefix(group, version)
        digest = hashlib.sha256(
            json.dumps(_document(catalogue, group, version), sort_keys=True).encode()
        ).hexdigest()[:32]
        entries[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest.upper()}"}
    return {"paths": entries}


def document(catalogue: Catalogue, path: str) -> JsonObject | None:
    """`/openapi/v3/apis/{group}/{version}` (or `api/v1`), None if nothing is served there."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"] and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    if (group, version) not in _served_group_versions(catalogue):
        return None
    return _document(catalogue, group, version)


def _gvk(resource_type: ResourceType, version: str) -> JsonObject:
    return {"group": resource_type.group, "version": version, "kind": resource_type.kind}


def _schema_name(resource_type: ResourceType, version: str) -> str:
    reversed_group = ".".join(reversed(resource_type.group.split("."))) or "io.k8s.api.core"
    return f"{reversed_group}.{version}.{resource_type.kind}"


def _operation(resource_type: ResourceType, version: str, action: str) -> JsonObject:
    operation: JsonObject = {
        "operationId": f"{action}{resource_type.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(resource_type, version),
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _QUERY_PARAMETERS
        ],
        "responses": {"200": {"description": "OK"}},
    }
    if action == "patch":
        operation["requestBody"] = {
            "content": {
                media: {"schema": {"type": "object"}}
                for media in (
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                )
            }
        }
    return operation


def _paths(resource_type: ResourceType, group: str, version: str) -> JsonObject:
    base = "/" + _prefix(group, version)
    scope = "/namespaces/{namespace}" if resource_type.namespaced else ""
    collection = f"{base}{scope}/{resource_type.plural}"
    item = f"{collection}/{{name}}"
    paths: JsonObject = {
        collection: {
            "get": _operation(resource_type, version, "list"),
            "post": _operation(resource_type, version, "post"),
        },
        item: {
            action: _operation(resource_type, version, name)
            for action, name in (
                ("get", "get"),
                ("put", "put"),
                ("patch", "patch"),
                ("delete", "delete"),
            )
        },
    }
    served = resource_type.version(version)
    if served is not None and served.has_status:
        paths[f"{item}/status"] = {
            action: _operation(resource_type, version, name)
            for action, name in (("get", "get"), ("put", "put"), ("patch", "patch"))
        }
    return paths
