"""Admission of a write: schema pruning, defaulting and validation, and name rules.

Refusals are 422 `Invalid` naming every offending field; fields the schema does not declare
are pruned, and reported as warnings (`?fieldValidation=Warn`, the server's default) or
refused with 400 (`Strict`, what `kubectl apply` asks for).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swivel_tools.sandbox import schemas, strategies
from swivel_tools.sandbox.errors import Cause, bad_request, invalid
from swivel_tools.sandbox.resources import CRD_KEY, Endpoint

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore, as ?fieldValidation=


DEFAULT_WRITE = WriteOptions()


def admit(
    endpoint: Endpoint,
    obj: JsonObject,
    options: WriteOptions,
    extra: list[Cause] | tuple[Cause, ...] = (),
) -> list[str]:
    """Prune, default and validate `obj` in place; returns warnings for the client."""
    name = obj["metadata"].get("name", "")
    causes = list(extra)
    pruned: list[str] = []
    schema = endpoint.served.schema
    if schema is not None:
        pruned, violations = schemas.admit(obj, schema)
        causes.extend(violations)
    if endpoint.key == CRD_KEY:
        causes.extend(strategies.crd_causes(obj))
    if causes:
        raise invalid(endpoint.type.kind, endpoint.type.group, name, causes)
    if pruned and options.field_validation == "Strict":
        kind = endpoint.type.kind
        unknown = ", ".join(f'unknown field "{path}"' for path in pruned)
        raise bad_request(
            f'{kind} in version "{endpoint.version}" cannot be handled as a {kind}:'
            f" strict decoding error: {unknown}"
        )
    if options.field_validation == "Ignore":
        return []
    return [f'unknown field "{path}"' for path in pruned]
