"""The three PATCH flavours the API server accepts, applied to plain JSON documents.

- JSON merge patch (RFC 7386): what kopf and `kubectl apply` send for custom resources.
- JSON patch (RFC 6902): kopf's finalizer edits, guarded by a `test` of resourceVersion;
  a failed `test` (or a path that does not exist) is a 422, as on the real server.
- Strategic merge patch, built-in kinds only (the real server refuses it for custom
  resources with 415): a simplification that merges lists of objects by the merge keys
  of the common built-in fields and honours the `$patch`, `$retainKeys`-free subset of
  directives that kubectl sends; other directives are dropped.
"""

from __future__ import annotations

import copy
from typing import Any

from swivel_tools.sandbox.errors import bad_request, unprocessable

JsonObject = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces. A new
    object; neither argument changes (the target is copied once, not once per level)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    _merge_into(result, patch)
    return result


def _merge_into(result: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            if not isinstance(current, dict):
                current = result[key] = {}
            _merge_into(current, value)
        else:
            result[key] = copy.deepcopy(value)


# JSON patch (RFC 6902).


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable(f"invalid JSON pointer: {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], part: str, path: str, *, for_insert: bool) -> int:
    if part == "-" and for_insert:
        return len(container)
    if not part.isdigit():
        raise unprocessable(f"invalid array index {part!r} in {path}")
    index = int(part)
    if index > len(container) or (index == len(container) and not for_insert):
        raise unprocessable(f"array index {index} out of bounds in {path}")
    return index


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part, path, for_insert=False)]
        else:
            raise unprocessable(f"doc is missing path: {path}")
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, for_insert=False)]
    raise unprocessable(f"doc is missing path: {path}")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent, last = _parent(doc, parts, path), parts[-1] if parts else ""
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, for_insert=False))
    raise unprocessable(f"remove operation does not apply: doc is missing path: {path}")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, for_insert=True), copy.deepcopy(value))
    else:
        raise unprocessable(f"add operation does not apply: doc is missing path: {path}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902, atomically: the target is untouched if any operation fails."""
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise bad_request(f"invalid JSON patch operation: {operation!r}")
        op, path = operation["op"], operation["path"]
        if op == "test":
            if _get(doc, path) != operation.get("value"):
                raise unprocessable(f"testing value {path} failed: test failed")
        elif op == "remove":
            _remove(doc, path)
        elif op == "add":
            doc = _add(doc, path, operation.get("value"))
        elif op == "replace":
            _get(doc, path)  # must exist
            if _pointer(path):
                _remove(doc, path)
            doc = _add(doc, path, operation.get("value"))
        elif op in ("move", "copy"):
            value = _get(doc, operation.get("from", ""))
            if op == "move":
                _remove(doc, operation["from"])
            doc = _add(doc, path, value)
        else:
            raise bad_request(f"Unexpected kind: {op}")
    return doc


# Strategic merge patch (simplified; built-in kinds only).

# Field name → merge key of its list elements, for the built-in fields operators touch.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
}
# Lists of scalars the real server merges as sets.
MERGED_SCALAR_LISTS = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
        elif key.startswith("$"):
            continue  # $setElementOrder, $retainKeys, ...: ordering and pruning hints
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGED_SCALAR_LISTS:
            current = list(result.get(key) or [])
            result[key] = current + [item for item in value if item not in current]
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            return copy.deepcopy(patch)  # not a keyed list after all: replace it
        position = next(
            (
                index
                for index, old in enumerate(merged)
                if isinstance(old, dict) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if position is not None:
                merged.pop(position)
        elif position is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[position] = strategic_merge_patch(merged[position], item)
    return merged
