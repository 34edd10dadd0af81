"""Reading manifests from YAML files: the one door through which user input enters.

Everything that can go wrong (missing file, bad YAML, wrong kind, schema or semantic
errors) comes out as a `SpecError` whose problems name a field, never as a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from swivel.api.base import API_GROUP
from swivel.api.errors import FieldProblem, SpecError, problems_from
from swivel.api.reconfiguration import Reconfiguration
from swivel.api.streamjob import StreamJob

Resource = TypeVar("Resource", StreamJob, Reconfiguration)


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError.single(str(path), f"cannot read: {error.strerror or error}") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError.single(where, f"not valid YAML: {problem}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise SpecError.single(str(path), "expected exactly one YAML mapping (one manifest)")
    return documents[0]


def parse_manifest(document: dict[str, Any], model: type[Resource]) -> Resource:
    """Validate one manifest; `kind` and `apiVersion` must match when present."""
    expected_kind = model.model_fields["kind"].default
    kind = document.get("kind", expected_kind)
    if kind != expected_kind:
        raise SpecError.single("kind", f"expected {expected_kind}, got {kind!r}")
    api_version = str(document.get("apiVersion", f"{API_GROUP}/v1alpha1"))
    if not api_version.startswith(f"{API_GROUP}/"):
        raise SpecError.single("apiVersion", f"expected {API_GROUP}/v1alpha1, got {api_version!r}")
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise SpecError(problems_from(error)) from None


def load_manifest(path: Path, model: type[Resource]) -> Resource:
    return parse_manifest(load_yaml(path), model)


def load_streamjob(path: Path) -> StreamJob:
    return load_manifest(path, StreamJob)


def load_reconfiguration(path: Path) -> Reconfiguration:
    return load_manifest(path, Reconfiguration)


__all__ = ["FieldProblem", "SpecError", "load_reconfiguration", "load_streamjob", "parse_manifest"]
