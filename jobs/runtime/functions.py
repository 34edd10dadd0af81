"""Operator functions are `module:callable` references, resolved only from an allow-list.

A reference names code that will run inside every Python worker, so it is checked before
anything is imported: it must be the value of an installed entry point in the group
`swivel.functions`, or live under one of the configured module prefixes (by default
`swivel.jobs.examples.`). Anything else raises `FunctionRefused(field, reason)`; at run time
the operator wrapper treats a refused update as "stay on the old function".

A function declares the columns it adds with `@emits("score double, flagged boolean")`, so
the compiled query knows each operator's output schema without running it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any, TypeVar

ENTRY_POINT_GROUP = "swivel.functions"
DEFAULT_PREFIXES = ("swivel.jobs.examples.",)
EMITS_ATTRIBUTE = "__swivel_emits__"

F = TypeVar("F", bound=Callable[..., Any])


class FunctionRefused(ValueError):  # noqa: N818 - the name the issue and the protocol use
    """A function reference that may not, or cannot, be used. `field` names where it came from."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AllowList:
    """Which references may be imported: installed entry points or these module prefixes."""

    prefixes: tuple[str, ...] = DEFAULT_PREFIXES
    entry_point_group: str = ENTRY_POINT_GROUP

    def permits(self, ref: str) -> bool:
        module = ref.partition(":")[0]
        if any(module.startswith(p) or module == p.rstrip(".") for p in self.prefixes):
            return True
        return ref in _entry_point_refs(self.entry_point_group)


@lru_cache(maxsize=8)
def _entry_point_refs(group: str) -> frozenset[str]:
    return frozenset(ep.value.replace(" ", "") for ep in entry_points(group=group))


def emits(ddl: str) -> Callable[[F], F]:
    """Declare the columns a function adds to its input (a Spark DDL column list)."""

    def mark(function: F) -> F:
        setattr(function, EMITS_ATTRIBUTE, ddl)
        return function

    return mark


def emitted_columns(function: Callable[..., Any]) -> str:
    """The DDL a function declared with `@emits`, or "" when it adds no columns."""
    return str(getattr(function, EMITS_ATTRIBUTE, ""))


def resolve(ref: str, allow: AllowList, field: str = "function") -> Callable[..., Any]:
    """Import `module:callable` if the allow-list permits it; otherwise FunctionRefused."""
    module_name, sep, attribute_path = ref.partition(":")
    if not sep or not module_name or not attribute_path:
        raise FunctionRefused(field, f"{ref!r} is not of the form module:callable")
    if not allow.permits(ref):
        raise FunctionRefused(
            field,
            f"{ref!r} is not allowed: register it as an entry point in group "
            f"{allow.entry_point_group!r} or put it under one of {list(allow.prefixes)}",
        )
    return _import(ref, field)


@lru_cache(maxsize=256)
def _import(ref: str, field: str) -> Callable[..., Any]:
    module_name, _, attribute_path = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise FunctionRefused(field, f"cannot import module {module_name!r}: {error}") from None
    for part in attribute_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise FunctionRefused(
                field, f"{module_name!r} has no attribute {attribute_path!r}"
            ) from None
    if not callable(target):
        raise FunctionRefused(field, f"{ref!r} is not callable")
    return target  # type: ignore[no-any-return]
