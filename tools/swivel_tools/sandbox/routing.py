"""Kubernetes REST paths, parsed into what they address.

`/api/v1/namespaces/default/pods/p1/status` and `/apis/swivel.dev/v1alpha1/streamjobs`
share one grammar: a group/version prefix, an optional `namespaces/{ns}` segment, a plural,
an optional name and an optional subresource. `/api/v1/namespaces/{name}[/status]` is the
namespace object itself, which the grammar has to tell apart from a namespaced collection.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class Route:
    group: str
    version: str
    plural: str | None = None  # None: the group/version's discovery document
    namespace: str | None = None  # the `namespaces/{ns}` segment, if any
    name: str | None = None
    subresource: str | None = None


def parse(path: str) -> Route | None:
    """The route of an API path, or None if it is not one (404)."""
    segments = [s for s in path.strip("/").split("/") if s]
    if len(segments) >= 2 and segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return None
    if not rest:
        return Route(group, version)
    is_namespace_object = len(rest) == 3 and rest[2] in NAMESPACE_SUBRESOURCES
    if rest[0] == "namespaces" and len(rest) >= 3 and not is_namespace_object:
        namespace, rest = rest[1], rest[2:]
    else:
        namespace = None
    if len(rest) > 3:
        return None
    return Route(
        group=group,
        version=version,
        plural=rest[0],
        namespace=namespace,
        name=rest[1] if len(rest) > 1 else None,
        subresource=rest[2] if len(rest) > 2 else None,
    )
