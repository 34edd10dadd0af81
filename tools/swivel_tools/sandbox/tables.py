"""Server-side printing: the `Table` kubectl asks for (`Accept: ...;as=Table;g=meta.k8s.io`).

Custom resources get the columns their CRD declares (`additionalPrinterColumns`, with the
small JSONPath subset CRDs use: `.a.b`, `[0]`, `[*]`, `[?(@.type=="Ready")]`); built-in
kinds get Name and Age plus a few familiar columns. Without this kubectl would still work,
but `kubectl get streamjobs` would not show Ready, Phase or Bins.
"""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swivel_tools.sandbox.registry import Registry
    from swivel_tools.sandbox.resources import ResourceType

JsonObject = dict[str, Any]

NAME_COLUMN = {"name": "Name", "type": "string", "format": "name", "priority": 0,
               "description": "Name must be unique within a namespace."}  # fmt: skip
AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
BUILTIN_COLUMNS: dict[tuple[str, str], list[JsonObject]] = {
    ("", "pods"): [
        {"name": "Status", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName", "priority": 1},
    ],
    ("", "namespaces"): [{"name": "Status", "type": "string", "jsonPath": ".status.phase"}],
    ("", "events"): [
        {"name": "Type", "type": "string", "jsonPath": ".type"},
        {"name": "Reason", "type": "string", "jsonPath": ".reason"},
        {"name": "Object", "type": "string", "jsonPath": ".involvedObject.name"},
        {"name": "Message", "type": "string", "jsonPath": ".message"},
    ],
}
_STEP = re.compile(
    r"""\.([A-Za-z0-9_-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*["']([^"']*)["']\)\]"""
)


def wanted(accept: str) -> bool:
    return "as=Table" in accept


def json_path(obj: Any, path: str) -> list[Any]:
    """All values `path` selects in `obj` (the subset of JSONPath printer columns use)."""
    values = [obj]
    position = 0
    path = path.strip().removeprefix("{").removesuffix("}").removeprefix("$")
    while position < len(path):
        match = _STEP.match(path, position)
        if match is None:
            return []
        position = match.end()
        key, index, filter_key, filter_value = match.groups()
        selected: list[Any] = []
        for value in values:
            if key is not None and isinstance(value, dict) and key in value:
                selected.append(value[key])
            elif index == "*" and isinstance(value, list):
                selected.extend(value)
            elif (
                index is not None
                and index != "*"
                and isinstance(value, list)
                and int(index) < len(value)
            ):
                selected.append(value[int(index)])
            elif filter_key is not None and isinstance(value, list):
                selected.extend(
                    item for item in value
                    if isinstance(item, dict) and str(_dig(item, filter_key)) == filter_value
                )  # fmt: skip
        values = selected
    return values


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def human_age(timestamp: str, now: datetime.datetime | None = None) -> str:
    """Like kubectl's ages: 45s, 4m10s, 12m, 5h3m, 30h, 3d4h, 12d, 2y100d."""
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.datetime.now(datetime.UTC)) - then).total_seconds())
    if seconds < 0:
        return "<invalid>"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d"


def _cell(obj: JsonObject, column: JsonObject) -> Any:
    values = json_path(obj, column.get("jsonPath", ""))
    if not values or values[0] is None:
        return None
    value = values[0]
    if column.get("type") == "date":
        return human_age(str(value))
    if isinstance(value, dict | list):
        return str(value)
    return value


def _columns(resource_type: ResourceType | None, version: str) -> list[JsonObject]:
    if resource_type is None:
        return [AGE_COLUMN]
    served = resource_type.version(version)
    if resource_type.custom and served is not None and served.printer_columns:
        return list(served.printer_columns)
    return [*BUILTIN_COLUMNS.get(resource_type.key, []), AGE_COLUMN]


def render(registry: Registry, body: JsonObject) -> JsonObject:
    """The Table for a list or an object; other bodies (Status) are left as they are."""
    kind = str(body.get("kind", ""))
    if kind == "Status" or not kind:
        return body
    group, _, version = str(body.get("apiVersion", "")).rpartition("/")
    items = body.get("items") if "items" in body else [body]
    kind = kind.removesuffix("List") if "items" in body else kind
    resource_type = next(
        (t for t in registry.catalogue.all() if t.group == group and t.kind == kind), None
    )
    columns = _columns(resource_type, version)
    definitions = [dict(NAME_COLUMN)] + [
        {"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
         "description": c.get("description", ""), "priority": c.get("priority", 0)}
        for c in columns
    ]  # fmt: skip
    rows = [
        {
            "cells": [item["metadata"]["name"], *(_cell(item, c) for c in columns)],
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item["metadata"],
            },
        }
        for item in items or []
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            k: v for k, v in (body.get("metadata") or {}).items()
            if k in ("resourceVersion", "continue", "remainingItemCount")
        },
        "columnDefinitions": definitions,
        "rows": rows,
    }  # fmt: skip
