"""A kubeconfig that points kubectl, kopf and the `kubernetes` client at the sandbox.

Plain HTTP on 127.0.0.1 and a placeholder bearer token (the sandbox accepts any token):
the entries are named `swivel-sandbox` so that `down` can recognise a file it wrote.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

NAME = "swivel-sandbox"
TOKEN = "swivel-sandbox"  # any token is accepted; clients just like to send one


def render(url: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {"server": url}}],
        "users": [{"name": NAME, "user": {"token": TOKEN}}],
        "contexts": [
            {"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": namespace}}
        ],
        "current-context": NAME,
        "preferences": {},
    }


def write(path: Path, url: str, namespace: str = "default") -> Path:
    """Write atomically (readers never see half a file), readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(yaml.safe_dump(render(url, namespace), sort_keys=False), encoding="utf-8")
    os.chmod(staging, 0o600)
    staging.replace(path)
    return path


def is_ours(path: Path) -> bool:
    """Did `write` produce this file? (Never delete a kubeconfig someone else owns.)"""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(config, dict) and config.get("current-context") == NAME
