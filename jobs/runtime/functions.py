"""Operator functions are `module:callable` references, resolved only from an allow-list.

The rule and the admission check live in `swivel.api.functions` (the CLI, the operator and
the agent refuse a reference before a plan exists, without importing anything). This is
the workers' check, defence in depth and the authoritative one: it imports the allowed
module and accepts only a Python function whose `__module__` is that module and whose
`__globals__` are that module's namespace, reached through the module's and its classes'
own `__dict__` (no `getattr`, so no module `__getattr__`, no inherited attributes, no
module objects, no imported names). At run time the operator wrapper treats a refused
update as "stay on the old function".

A function declares the columns it adds with `@emits("score double, flagged boolean")`, so
the compiled query knows each operator's output schema without running it.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from swivel.api.functions import (
    DEFAULT_PREFIXES,
    ENTRY_POINT_GROUP,
    AllowList,
    FunctionRefused,
    split_reference,
)

EMITS_ATTRIBUTE = "__swivel_emits__"

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "DEFAULT_PREFIXES",
    "ENTRY_POINT_GROUP",
    "AllowList",
    "FunctionRefused",
    "emits",
    "emitted_columns",
    "resolve",
]


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
    """The function `ref` names, if the allow-list permits it; otherwise FunctionRefused.

    The module is imported only after its name passed the allow-list."""
    module_name, _ = split_reference(ref, field)
    if allow.entry_point(ref) is not None:
        return _load_entry_point(ref, allow.entry_point_group, field)
    if not allow.allows_module(module_name):
        raise FunctionRefused(field, f"{ref!r} is not allowed; {allow.describe()}")
    return _import(ref, field)


@lru_cache(maxsize=64)
def _load_entry_point(ref: str, group: str, field: str) -> Callable[..., Any]:
    """An entry point is the installer's explicit choice: its value is loaded as declared."""
    entry_point = AllowList(prefixes=(), entry_point_group=group).entry_point(ref)
    assert entry_point is not None
    try:
        target = entry_point.load()
    except Exception as error:  # an installed package that fails to import
        raise FunctionRefused(field, f"entry point {ref!r} cannot be loaded: {error}") from None
    if not callable(target):
        raise FunctionRefused(field, f"entry point {ref!r} is not callable")
    return target  # type: ignore[no-any-return]


@lru_cache(maxsize=256)
def _import(ref: str, field: str) -> Callable[..., Any]:
    module_name, parts = split_reference(ref, field)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or the module's own code failing at import
        reason = f"{type(error).__name__}: {error}"[:300]
        raise FunctionRefused(field, f"cannot import module {module_name!r}: {reason}") from None
    if not isinstance(module, types.ModuleType) or module.__name__ != module_name:
        raise FunctionRefused(field, f"{module_name!r} is not the module it names")
    namespace: Mapping[str, Any] = vars(module)
    owner = f"module {module_name!r}"
    target: Any = None
    for depth, part in enumerate(parts):
        if part not in namespace:
            raise FunctionRefused(field, f"{ref!r}: {part!r} is not defined in {owner}")
        target = namespace[part]
        if depth < len(parts) - 1:
            qualname = ".".join(parts[: depth + 1])
            if not (
                isinstance(target, type)
                and target.__module__ == module_name
                and target.__qualname__ == qualname
            ):
                raise FunctionRefused(field, f"{ref!r}: {part!r} is not a class defined in {owner}")
            namespace, owner = vars(target), f"class {qualname!r} of module {module_name!r}"
    holder = target
    function = target.__func__ if isinstance(target, staticmethod | classmethod) else target
    if not (
        isinstance(function, types.FunctionType)
        and function.__module__ == module_name
        and function.__globals__ is vars(module)
        and not inspect.iscoroutinefunction(function)  # the workers call synchronously
        and not inspect.isasyncgenfunction(function)
    ):
        raise FunctionRefused(field, f"{ref!r} is not a function defined in module {module_name!r}")
    if isinstance(holder, classmethod):
        return types.MethodType(function, _owner_class(module, parts))
    return function


def _owner_class(module: types.ModuleType, parts: tuple[str, ...]) -> type:
    owner: Any = module
    for part in parts[:-1]:
        owner = vars(owner)[part]
    assert isinstance(owner, type)
    return owner
