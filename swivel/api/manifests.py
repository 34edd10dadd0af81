"""Reading manifests from YAML files: the one door through which user input enters.

Everything that can go wrong (missing file, a file that is not UTF-8 text, bad or hostile
YAML, wrong kind, schema or semantic errors, a function outside the allow-list) comes out as
a `SpecError` whose problems name a field, never as a traceback.

The YAML is read defensively, as a Kubernetes API server would see it: a size bound before
anything is parsed; bytes decoded explicitly (UTF-8, with or without a byte-order mark;
UTF-16 and UTF-32 only with their byte-order mark, as YAML 1.2 allows; anything else is
refused with the offending offset); nesting depth and the node count after aliases are
expanded bounded from the parser's event stream before any object is built (a 2 000-deep
document or a "billion laughs" alias bomb is a clear error, not a RecursionError or an
exhausted machine); timestamps stay strings (`name: 2001-13-45` is a name, as in JSON).
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from swivel.api.base import API_GROUP
from swivel.api.errors import FieldProblem, SpecError, problems_from
from swivel.api.functions import spec_problems
from swivel.api.reconfiguration import Reconfiguration
from swivel.api.streamjob import StreamJob

Resource = TypeVar("Resource", StreamJob, Reconfiguration)

MAX_MANIFEST_BYTES = 1024 * 1024  # the API server's own limit on an object is ~1.5 MiB
MAX_DEPTH = 64  # mappings and sequences inside one another
MAX_NODES = 200_000  # scalars and collections, aliases expanded
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class _Loader(yaml.SafeLoader):
    """SafeLoader without the YAML 1.1 timestamp type: a date-looking value is a string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 (a BOM is dropped), or UTF-16/32 with a BOM; anything else is refused."""
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise SpecError.single(
            where,
            f"not {encoding.removesuffix('-sig').upper()} text (byte 0x{data[error.start]:02x} "
            f"at offset {error.start}); save the file as UTF-8",
        ) from None


def parse_yaml(text: str, where: str) -> list[Any]:
    """Every document of `text`, after the depth and size bounds were checked."""
    try:
        _check_bounds(text, where)
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError.single(at, f"not valid YAML: {problem}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as error:
        # Constructors fail outside YAMLError: a 5 000-digit integer (int's digit limit),
        # an unhashable mapping key, a value no Python type can hold.
        raise SpecError.single(where, f"not valid YAML: {_first_line(error)}") from None


def _check_bounds(text: str, where: str) -> None:
    """Depth and expanded node count from the event stream: nothing is built yet."""
    depth, nodes = 0, 0
    starts: list[tuple[str | None, int]] = []
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            nodes += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise SpecError.single(f"{where}:{line}", f"nested deeper than {MAX_DEPTH} levels")
            starts.append((event.anchor, nodes))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = starts.pop()
            if anchor is not None:
                sizes[anchor] = nodes - start + 1
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            nodes += sizes.get(event.anchor or "", 1)
        if nodes > MAX_NODES:
            raise SpecError.single(where, f"more than {MAX_NODES} values once aliases are expanded")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]


def load_yaml(path: Path) -> dict[str, Any]:
    where = str(path)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_MANIFEST_BYTES + 1)
    except OSError as error:
        raise SpecError.single(where, f"cannot read: {error.strerror or error}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise SpecError.single(where, f"larger than {MAX_MANIFEST_BYTES} bytes")
    documents = parse_yaml(decode_text(data, where), where)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise SpecError.single(where, "expected exactly one YAML mapping (one manifest)")
    return documents[0]


def parse_manifest(document: dict[str, Any], model: type[Resource]) -> Resource:
    """Validate one manifest; `kind` and `apiVersion` must match when present."""
    expected_kind = model.model_fields["kind"].default
    kind = document.get("kind", expected_kind)
    if kind != expected_kind:
        raise SpecError.single("kind", f"expected {expected_kind}, got {_short(kind)}")
    api_version = document.get("apiVersion", f"{API_GROUP}/v1alpha1")
    if not isinstance(api_version, str) or not api_version.startswith(f"{API_GROUP}/"):
        raise SpecError.single(
            "apiVersion", f"expected {API_GROUP}/v1alpha1, got {_short(api_version)}"
        )
    metadata_problem = _metadata_problem(document.get("metadata", {}))
    if metadata_problem is not None:
        raise SpecError([metadata_problem])
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise SpecError(problems_from(error)) from None
    except RecursionError:
        raise SpecError.single("spec", "nested too deeply") from None


def _metadata_problem(metadata: Any) -> FieldProblem | None:
    """What the API server would refuse in a file's metadata: not a mapping, or a name that
    is not a DNS-1123 subdomain (kubectl would never send the object)."""
    if not isinstance(metadata, dict):
        return FieldProblem("metadata", "expected a mapping")
    if "name" not in metadata:
        return None
    name = metadata["name"]
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        return FieldProblem(
            "metadata.name",
            f"{_short(name)} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and "
            "'.', at most 253 characters, starting and ending alphanumeric)",
        )
    return None


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a 5 000-digit integer has no repr
        return f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def load_manifest(path: Path, model: type[Resource]) -> Resource:
    """A validated manifest whose function references the installation allows."""
    resource = parse_manifest(load_yaml(path), model)
    problems = spec_problems(resource.spec)
    if problems:
        raise SpecError(problems)
    return resource


def load_streamjob(path: Path) -> StreamJob:
    return load_manifest(path, StreamJob)


def load_reconfiguration(path: Path) -> Reconfiguration:
    return load_manifest(path, Reconfiguration)


__all__ = ["FieldProblem", "SpecError", "load_reconfiguration", "load_streamjob", "parse_manifest"]
