"""Kubernetes Events for every transition a user should see in `kubectl describe`.

kopf posts them asynchronously (its own queue and client), so emitting never blocks or
fails a handler. Only the involved object's identity is needed, never the whole body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf

NORMAL = "Normal"
WARNING = "Warning"


def involved(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata", {})
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"),
        },
    }


def emit(obj: Mapping[str, Any], reason: str, message: str, *, warning: bool = False) -> None:
    body = cast(kopf.Body, involved(obj))  # kopf reads it as a mapping
    kopf.event(body, type=WARNING if warning else NORMAL, reason=reason, message=message)
