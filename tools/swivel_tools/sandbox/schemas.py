"""Admission of custom resources against their CRD's `openAPIV3Schema`, in the server's order.

1. **Pruning**: fields the schema does not declare are dropped (unless
   `x-kubernetes-preserve-unknown-fields`); the dropped paths are returned so that
   `?fieldValidation=Strict` can refuse them and `Warn` can report them.
2. **Defaulting**: `default`s fill absent fields of objects that exist; a `null` in a
   non-nullable field takes the default, or is dropped when there is none.
3. **Validation**: JSON Schema draft 4 (the dialect of OpenAPI v3.0 schemas) with
   `nullable`, `x-kubernetes-int-or-string` and the list-type uniqueness of
   `x-kubernetes-list-type: map|set`. Errors name the field the way the real server does
   (`spec.dataflow.bins`, `spec.dataflow.operators[0].name`).

Not supported: CEL rules (`x-kubernetes-validations`), validation ratcheting.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Iterable, Iterator
from typing import Any

from jsonschema import (  # type: ignore[import-untyped]
    Draft4Validator,
    FormatChecker,
    ValidationError,
)

from swivel_tools.sandbox.errors import Cause

JsonObject = dict[str, Any]

OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
        "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
        "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip
PRESERVE = "x-kubernetes-preserve-unknown-fields"


# Pruning.


def prune(obj: JsonObject, schema: JsonObject) -> list[str]:
    """Drop undeclared fields in place; return their paths (`spec.foo`)."""
    removed: list[str] = []
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for key in [k for k in metadata if k not in OBJECT_META_FIELDS]:
            del metadata[key]
            removed.append(f"metadata.{key}")
    properties = schema.get("properties") or {}
    for key in [k for k in obj if k not in ("apiVersion", "kind", "metadata")]:
        if key in properties:
            removed.extend(_prune(obj[key], properties[key], key))
        elif not schema.get(PRESERVE):
            del obj[key]
            removed.append(key)
    return removed


def _prune(value: Any, schema: JsonObject, path: str) -> list[str]:
    removed: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        keep_envelope = bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            child = f"{path}.{key}"
            if properties is not None and key in properties:
                removed.extend(_prune(value[key], properties[key], child))
            elif isinstance(additional, dict):
                removed.extend(_prune(value[key], additional, child))
            elif (
                schema.get(PRESERVE)
                or additional is True
                or (keep_envelope and key in ("apiVersion", "kind", "metadata"))
            ):
                continue
            else:
                del value[key]
                removed.append(child)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            removed.extend(_prune(item, schema["items"], f"{path}[{index}]"))
    return removed


# Defaulting.


def apply_defaults(value: Any, schema: JsonObject) -> None:
    """Fill `default`s in place, recursively, into objects and arrays that are present."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, child in properties.items():
            nullable = bool(child.get("nullable"))
            if (key not in value or (value[key] is None and not nullable)) and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            elif key in value and value[key] is None and not nullable:
                del value[key]
            if key in value:
                apply_defaults(value[key], child)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key in value:
                if key not in properties:
                    apply_defaults(value[key], additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


# Validation.

_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def _draft4(schema: Any) -> Any:
    """Translate the Kubernetes extensions into plain draft-4 terms."""
    if not isinstance(schema, dict):
        return schema
    result = dict(schema)
    if isinstance(result.get("properties"), dict):
        result["properties"] = {k: _draft4(v) for k, v in result["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(result.get(key), dict):
            result[key] = _draft4(result[key])
    for key in _SCHEMA_LISTS:
        if isinstance(result.get(key), list):
            result[key] = [_draft4(item) for item in result[key]]
    if result.get("x-kubernetes-int-or-string"):
        result.pop("type", None)
        result["anyOf"] = [*result.get("anyOf", []), {"type": "integer"}, {"type": "string"}]
    if result.get("nullable"):
        if isinstance(result.get("type"), str):
            result["type"] = [result["type"], "null"]
        if isinstance(result.get("enum"), list):
            result["enum"] = [*result["enum"], None]
    return result


_formats = FormatChecker(formats=())


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if "T" not in value.upper() and " " not in value:
        raise ValueError("not a date-time")
    datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


_formats.checks("date-time", raises=ValueError)(_is_date_time)


# Compiled validators by schema identity; the schema is kept so that its id stays unique.
_compiled: dict[int, tuple[JsonObject, Draft4Validator]] = {}


def _validator(schema: JsonObject) -> Draft4Validator:
    cached = _compiled.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_compiled) > 256:
            _compiled.clear()
        cached = (schema, Draft4Validator(_draft4(schema), format_checker=_formats))
        _compiled[id(schema)] = cached
    return cached[1]


def field_path(parts: Iterable[Any]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _go_value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else f'"{value}"'


def _causes(error: ValidationError) -> Iterator[Cause]:
    path = field_path(error.absolute_path)
    where = path or "<root>"
    if error.validator == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        for name in error.validator_value:
            if name not in instance:
                yield Cause(
                    f"{path}.{name}" if path else name, "FieldValueRequired", "Required value"
                )
    elif error.validator == "enum":
        supported = ", ".join(f'"{v}"' for v in error.validator_value if v is not None)
        yield Cause(
            path,
            "FieldValueNotSupported",
            f"Unsupported value: {_go_value(error.instance)}: supported values: {supported}",
        )
    elif error.validator == "type":
        expected = error.validator_value
        expected = expected[0] if isinstance(expected, list) else expected
        actual = _json_type(error.instance)
        yield Cause(
            path,
            "FieldValueTypeInvalid",
            f'Invalid value: "{actual}": {where} in body must be of type {expected}: "{actual}"',
        )
    else:
        reason, detail = _describe(error)
        yield Cause(
            path, reason, f"Invalid value: {_go_value(error.instance)}: {where} in body {detail}"
        )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def _describe(error: ValidationError) -> tuple[str, str]:
    """(reason, wording) close to what the real server says for this keyword."""
    bound = error.validator_value
    exclusive = isinstance(error.schema, dict) and (
        error.schema.get("exclusiveMinimum") is True or error.schema.get("exclusiveMaximum") is True
    )
    wording = {
        "minimum": f"should be greater than {'' if exclusive else 'or equal to '}{bound}",
        "maximum": f"should be less than {'' if exclusive else 'or equal to '}{bound}",
        "pattern": f"should match '{bound}'",
        "minLength": f"should be at least {bound} chars long",
        "maxLength": f"may not be longer than {bound}",
        "minItems": f"should have at least {bound} items",
        "maxItems": f"must have at most {bound} items",
        "minProperties": f"should have at least {bound} properties",
        "maxProperties": f"should have at most {bound} properties",
        "format": f"must be of type {bound}",
        "multipleOf": f"should be a multiple of {bound}",
    }
    reasons = {"maxLength": "FieldValueTooLong", "maxItems": "FieldValueTooMany"}
    return (
        reasons.get(str(error.validator), "FieldValueInvalid"),
        wording.get(str(error.validator), error.message),
    )


def _list_duplicates(value: Any, schema: JsonObject, path: str) -> Iterator[Cause]:
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if key in value:
                yield from _list_duplicates(value[key], child, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        list_type = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: list[Any] = []
        for index, item in enumerate(value):
            identity = (
                tuple(item.get(k) for k in keys)
                if list_type == "map" and isinstance(item, dict)
                else item
            )
            if list_type in ("map", "set") and identity in seen:
                shown = dict(zip(keys, identity, strict=True)) if list_type == "map" else item
                yield Cause(
                    f"{path}[{index}]",
                    "FieldValueDuplicate",
                    f"Duplicate value: {_go_value(shown)}",
                )
            seen.append(identity)
            yield from _list_duplicates(item, schema["items"], f"{path}[{index}]")


def validate(obj: JsonObject, schema: JsonObject) -> list[Cause]:
    """Every violation, ordered by field path (the real server also sorts them)."""
    validator = _validator(schema)
    causes = [cause for error in validator.iter_errors(obj) for cause in _causes(error)]
    causes.extend(_list_duplicates(obj, schema, ""))
    return sorted(causes, key=lambda cause: cause.field)


def admit(obj: JsonObject, schema: JsonObject) -> tuple[list[str], list[Cause]]:
    """Prune, default and validate `obj` in place; returns (pruned paths, violations)."""
    pruned = prune(obj, schema)
    apply_defaults(obj, schema)
    return pruned, validate(obj, schema)
