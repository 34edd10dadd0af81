"""A protocol model's schema in OpenAPI 3.0 terms, for the agent's generated document.

Pydantic emits JSON Schema 2020-12; OpenAPI 3.0 (what the agent's document declares, and
what its callers' tooling reads) spells a few things differently: `nullable` instead of a
`null` branch, a boolean `exclusiveMinimum` beside `minimum`, no `const`, no
`propertyNames`. `openapi_schema` bridges the two, as `swivel.api.crds.structural` does
for the CRDs. A model named in `components` stays a `$ref` to its component; every other
nested model and enum is written inline, so each component reads on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel

COMPONENTS = "#/components/schemas/"
_DROPPED_KEYS = frozenset({"title", "$defs", "propertyNames", "discriminator"})
Mode = Literal["validation", "serialization"]


def component_name(model: type[BaseModel]) -> str:
    """The component a model is documented as: its class name, or `openapi_name` if set."""
    return str(getattr(model, "openapi_name", None) or model.__name__)


def openapi_schema(
    model: type[BaseModel], mode: Mode, components: frozenset[str]
) -> dict[str, Any]:
    """The OpenAPI 3.0 schema of `model`; the models named in `components` are `$ref`s."""
    schema = model.model_json_schema(by_alias=True, mode=mode)
    return _convert(schema, schema.get("$defs", {}), components)


def _convert(
    node: Mapping[str, Any], definitions: Mapping[str, Any], components: frozenset[str]
) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in components:
            return {"$ref": COMPONENTS + name}
        return _convert({**definitions[name], **_without(node, "$ref")}, definitions, components)
    if "anyOf" in node:
        return _nullable(node, definitions, components)
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or (key == "default" and value is None):
            continue
        if key == "properties":
            result[key] = {
                name: _convert(sub, definitions, components) for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            result[key] = _convert(value, definitions, components)
        elif key == "description":
            result[key] = " ".join(value.split())  # a docstring's line breaks mean nothing
        elif key == "const":
            result["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            result[bound], result[key] = value, True
        else:
            result[key] = value
    return result


def _nullable(
    node: Mapping[str, Any], definitions: Mapping[str, Any], components: frozenset[str]
) -> dict[str, Any]:
    """`anyOf: [X, null]` as X with `nullable: true`; several branches stay an anyOf."""
    branches = [b for b in node["anyOf"] if b.get("type") != "null"]
    nullable = len(branches) < len(node["anyOf"])
    rest = _convert(_without(node, "anyOf"), definitions, components)
    converted = [_convert(b, definitions, components) for b in branches]
    if len(converted) == 1 and "$ref" not in converted[0]:
        result = {**converted[0], **rest}
    elif len(converted) == 1:
        result = {"allOf": converted, **rest}
    else:
        result = {"anyOf": converted, **rest}
    if nullable:
        result["nullable"] = True
    return result


def _without(node: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != key}
