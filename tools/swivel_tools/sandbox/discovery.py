"""Discovery documents: what `/version`, `/api`, `/apis` and `/apis/{group}/{version}` say.

kopf scans these to resolve `streamjobs.swivel.dev` into a URL, its scope and whether it has
a `status` subresource (which decides how kopf patches status); kubectl maps `sj`,
`streamjob` or the category `swivel` to a resource through them. They are computed from the
catalogue on every request, so a CRD is discoverable the moment it is created.
"""

from __future__ import annotations

import platform
from typing import Any

from swivel_tools.sandbox.resources import ALL_VERBS, Catalogue, ResourceType

JsonObject = dict[str, Any]

KUBERNETES_VERSION = ("1", "31")  # the API level the sandbox imitates
SERVER_ADDRESSES = [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]


def version() -> JsonObject:
    major, minor = KUBERNETES_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{major}.{minor}.0-swivel-sandbox",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "none (python " + platform.python_version() + ")",
        "compiler": "none",
        "platform": "linux/amd64",
    }


def core_versions() -> JsonObject:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": SERVER_ADDRESSES,
    }


def _group(name: str, versions: list[str]) -> JsonObject:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {
        "name": name,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def group_list(catalogue: Catalogue) -> JsonObject:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in sorted(catalogue.groups().items())],
    }


def group(catalogue: Catalogue, name: str) -> JsonObject | None:
    versions = catalogue.groups().get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _entries(resource_type: ResourceType, version: str) -> list[JsonObject]:
    served = resource_type.version(version)
    assert served is not None
    main: JsonObject = {
        "name": resource_type.plural,
        "singularName": resource_type.singular,
        "namespaced": resource_type.namespaced,
        "kind": resource_type.kind,
        "verbs": list(ALL_VERBS),
    }
    if resource_type.short_names:
        main["shortNames"] = list(resource_type.short_names)
    if resource_type.categories:
        main["categories"] = list(resource_type.categories)
    entries = [main]
    if served.has_status:
        entries.append(
            {
                "name": f"{resource_type.plural}/status",
                "singularName": "",
                "namespaced": resource_type.namespaced,
                "kind": resource_type.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    return entries


def resource_list(catalogue: Catalogue, group_name: str, version_name: str) -> JsonObject | None:
    """The APIResourceList of one group/version, or None if nothing is served there."""
    resources = [
        entry
        for resource_type in sorted(catalogue.all(), key=lambda t: t.plural)
        if resource_type.group == group_name and resource_type.version(version_name)
        for entry in _entries(resource_type, version_name)
    ]
    if not resources:
        return None
    group_version = f"{group_name}/{version_name}" if group_name else version_name
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
