"""Turning every kind of bad input into one clear line per problem: `field: reason`.

Users meet these messages in three places (the CLI, Kubernetes conditions/events and the
agent's 400/422 answers), so they are built once here. A field is a dotted path in wire
names (`spec.dataflow.operators[2].inputs[0]`), the way `kubectl explain` spells it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

SEMANTIC_ERROR = "swivel_semantic"


@dataclass(frozen=True)
class FieldProblem:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


class SpecError(ValueError):
    """One or more problems with a manifest, each naming its field."""

    def __init__(self, problems: Sequence[FieldProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, field: str, reason: str) -> SpecError:
        return cls([FieldProblem(field, reason)])


def semantic_error(field: str, reason: str) -> PydanticCustomError:
    """Raised inside model validators: the field is relative to the model validated."""
    return PydanticCustomError(
        SEMANTIC_ERROR, "{field}: {reason}", {"field": field, "reason": reason}
    )


def join_path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part:
            path += f".{part}" if path else part
    return path


def problems_from(error: ValidationError, prefix: str = "") -> list[FieldProblem]:
    """Flatten pydantic's errors into `field: reason`, dropping its internal wording.

    Union branches (`function-after[...]`, `str`, `InputSpec`) appear in pydantic's
    locations; they mean nothing to a user, so only wire names and indexes are kept.
    """
    problems: list[FieldProblem] = []
    seen: set[tuple[str, str]] = set()
    for item in error.errors(include_url=False):
        parts: list[str | int] = [prefix] if prefix else []
        parts += [p for p in item["loc"] if isinstance(p, int) or _is_wire_name(p)]
        ctx = item.get("ctx") or {}
        if item["type"] == SEMANTIC_ERROR:
            parts.append(str(ctx["field"]))
            reason = str(ctx["reason"])
        else:
            reason = _plain(item["msg"], item["type"])
        key = (join_path(parts), reason)
        if key not in seen:
            seen.add(key)
            problems.append(FieldProblem(*key))
    return problems


_UNION_BRANCH_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _is_wire_name(part: str) -> bool:
    return "[" not in part and part not in _UNION_BRANCH_TAGS


def _plain(message: str, kind: str) -> str:
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; fields are camelCase)"
    if kind == "missing":
        return "required field is missing"
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message[:1].lower() + message[1:]
