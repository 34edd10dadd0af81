"""API errors as the real API server reports them: `Status` objects with a reason and a code.

Clients branch on `reason` and `code` (kopf raises its own `APIConflictError` on 409, the
`kubernetes` client puts the body into `ApiException.body`, kubectl prints `message`), so
every refusal of the sandbox goes through `ApiError` and is rendered the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Cause:
    """One field-level reason of an `Invalid` error, as in `details.causes` of a Status."""

    field: str
    reason: str
    message: str


@dataclass
class ApiError(Exception):
    """A refused request; `status()` is the body the client receives."""

    code: int
    reason: str
    message: str
    details: JsonObject = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> JsonObject:
        body: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def qualified(plural: str, group: str) -> str:
    """`configmaps` for the core group, `streamjobs.swivel.dev` otherwise (as in messages)."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(plural, group)} "{name}" not found',
        {"name": name, "group": group, "kind": plural},
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        {"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has'
        " been modified; please apply your changes to the latest version and try again",
        {"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid naming each offending field, like the real server's field validation."""
    summary = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    return ApiError(
        422,
        "Invalid",
        f'{kind}.{group} "{name}" is invalid: {summary}'
        if group
        else f'{kind} "{name}" is invalid: {summary}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [
                {"reason": c.reason, "message": c.message, "field": c.field} for c in causes
            ],
        },
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": content_type}]},
    )


def unprocessable(message: str) -> ApiError:
    """422 without field causes: what a failed JSON-patch `test` operation returns."""
    return ApiError(422, "Invalid", message)


def expired(requested: int, oldest: int) -> ApiError:
    """410 for a watch from a resourceVersion older than the retained history."""
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")
