"""The function allow-list: which `module:callable` references may ever run in a job.

A reference names code that every Python worker will run, so it is the trust boundary of a
StreamJob. The rule (issue 11, docs/functions.md):

- A reference is either exactly the value of an installed entry point of the group
  `swivel.functions`, or `module:name` / `module:Class.name` where `module` is an *allowed
  module*: equal to a configured prefix or below it on a dotted boundary (`a.b` allows
  `a.b` and `a.b.c`, never `a.bc`). The prefixes are the installation's
  (`SWIVEL_FUNCTION_PREFIXES`, comma separated, set from the chart's
  `functions.allowedPrefixes`; default `swivel.jobs.examples`, the examples only: the
  tests' probes, `swivel.jobs.testing`, are allowed only where the tests add them).
- The target must be a function *defined in that module*: a top-level `def` or a lambda
  assigned there, or a `def` (plain, static or class method) in the body of a class
  defined there. Nothing reached through an attribute that leads elsewhere: no module
  objects (`fraud:pd.read_pickle`), no imported names (`labels:emits`, `from x import
  y`), no classes of other modules (`fraud:pd.DataFrame.to_csv`), no name starting with
  `_` (dunders such as `__globals__`, `__class__`, `__init__`, and private helpers). A
  class itself is not a target: calling it would run constructors it may inherit from
  anywhere.

Two checks enforce it. Admission (`check_reference`: the CLI, the operator, the agent)
never imports the module: it finds the module's source file the way the import system
would, without executing any package `__init__`, and reads the definition from its syntax
tree, so no user code runs in a process that holds the operator's credentials. The workers
(`swivel.jobs.runtime.functions.resolve`) import the allowed module and check the objects
themselves (`__module__`, `__globals__`, own `__dict__` at every step): the authoritative
check, in case a module rebinds a name at import time in a way its syntax does not show.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from swivel.api.errors import FieldProblem

if TYPE_CHECKING:
    from swivel.api.reconfiguration import ReconfigurationSpec
    from swivel.api.streamjob import StreamJobSpec

ENTRY_POINT_GROUP = "swivel.functions"
PREFIXES_ENV = "SWIVEL_FUNCTION_PREFIXES"
DEFAULT_PREFIXES = ("swivel.jobs.examples",)
MAX_REFERENCE = 512
MAX_SOURCE_BYTES = 4 * 1024 * 1024  # a function module larger than this is not read at admission
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


class FunctionRefused(ValueError):  # noqa: N818 - the name the issue and the protocol use
    """A function reference that may not, or cannot, be used. `field` names where it came from."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def prefixes_from_env(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The installation's allowed module prefixes (`SWIVEL_FUNCTION_PREFIXES`).

    Unset means the default; set but empty means none (entry points only). A malformed
    entry is refused, never widened: an empty prefix would allow every module.
    """
    value = (os.environ if environ is None else environ).get(PREFIXES_ENV)
    if value is None:
        return DEFAULT_PREFIXES
    prefixes = []
    for raw in value.split(","):
        prefix = raw.strip().removesuffix(".")
        if not raw.strip():
            continue
        if not _DOTTED.match(prefix):
            raise FunctionRefused(PREFIXES_ENV, f"{raw.strip()!r} is not a dotted module name")
        prefixes.append(prefix)
    return tuple(prefixes)


def _normalise(prefixes: tuple[str, ...]) -> tuple[str, ...]:
    cleaned = tuple(p.strip().removesuffix(".") for p in prefixes)
    for prefix in cleaned:
        if not _DOTTED.match(prefix):
            raise FunctionRefused(PREFIXES_ENV, f"{prefix!r} is not a dotted module name")
    return cleaned


@dataclass(frozen=True, slots=True)
class AllowList:
    """The installation's allowed module prefixes plus the entry-point group.

    Built without arguments it reads `SWIVEL_FUNCTION_PREFIXES`, so every process of an
    installation (operator, agent, driver) agrees; the driver pickles its copy into the
    workers with the query.
    """

    prefixes: tuple[str, ...] = field(default_factory=prefixes_from_env)
    entry_point_group: str = ENTRY_POINT_GROUP

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefixes", _normalise(tuple(self.prefixes)))

    def allows_module(self, module: str) -> bool:
        """On dotted boundaries only: `a.b` allows `a.b` and `a.b.c`, not `a.bc`."""
        return any(module == p or module.startswith(p + ".") for p in self.prefixes)

    def entry_point(self, ref: str) -> EntryPoint | None:
        return _entry_points(self.entry_point_group).get(ref.replace(" ", ""))

    def describe(self) -> str:
        """The allow-list in effect, for refusals: what a user may reference instead."""
        installed = sorted(_entry_points(self.entry_point_group))
        modules = ", ".join(self.prefixes) or "none"
        points = ", ".join(installed) or "none installed"
        return (
            f"allowed: functions defined in modules under [{modules}] ({PREFIXES_ENV}), "
            f"or entry points of group {self.entry_point_group!r} [{points}]"
        )


@lru_cache(maxsize=8)
def _entry_points(group: str) -> dict[str, EntryPoint]:
    return {ep.value.replace(" ", ""): ep for ep in entry_points(group=group)}


def split_reference(ref: str, field: str) -> tuple[str, tuple[str, ...]]:
    """`module:a.b` -> ("module", ("a", "b")), refusing the syntax and the names never allowed."""
    if not isinstance(ref, str) or len(ref) > MAX_REFERENCE:
        raise FunctionRefused(field, f"a function reference is a string of at most {MAX_REFERENCE}")
    module, sep, path = ref.partition(":")
    if not sep or not _DOTTED.match(module) or not _DOTTED.match(path):
        raise FunctionRefused(field, f"{ref!r} is not of the form module:callable")
    parts = tuple(path.split("."))
    if any(p.startswith("__") for p in module.split(".")):
        raise FunctionRefused(field, f"{ref!r}: a dunder module name is never a function module")
    private = [p for p in parts if p.startswith("_")]
    if private:
        raise FunctionRefused(
            field,
            f"{ref!r}: {private[0]!r} starts with '_' (private names and dunders are refused)",
        )
    return module, parts


def check_reference(
    ref: str, allow: AllowList | None = None, field: str = "function", *, missing_ok: bool = True
) -> None:
    """Admission: refuse `ref` unless it names a function defined in an allowed module.

    Imports nothing. A module not installed in this process (the operator's image need not
    carry a job's function package) passes when `missing_ok`; the agent, in the job's own
    image, checks with `missing_ok=False`, and the workers check again by importing.
    """
    allow = allow if allow is not None else AllowList()
    try:
        module, parts = split_reference(ref, field)
    except FunctionRefused as refused:
        raise FunctionRefused(field, f"{refused.reason}; {allow.describe()}") from None
    if allow.entry_point(ref) is not None:
        return
    if not allow.allows_module(module):
        raise FunctionRefused(field, f"{ref!r} is not allowed; {allow.describe()}")
    problem = _static_problem(module, parts, missing_ok)
    if problem is not None:
        raise FunctionRefused(field, f"{ref!r} {problem}; {allow.describe()}")


def references(
    spec: StreamJobSpec | ReconfigurationSpec, prefix: str = "spec"
) -> list[tuple[str, str]]:
    """Every function reference a spec carries, with its field (wire names)."""
    found: list[tuple[str, str]] = []
    dataflow = getattr(spec, "dataflow", None)
    for index, op in enumerate(getattr(dataflow, "operators", ())):
        if op.function is not None:
            found.append((f"{prefix}.dataflow.operators[{index}].function", op.function))
    for index, update in enumerate(getattr(spec, "function_updates", ())):
        where = f"{prefix}.functionUpdates[{index}]"
        if update.function is not None:
            found.append((f"{where}.function", update.function))
        if update.state_transform is not None:
            found.append((f"{where}.stateTransform", update.state_transform))
    return found


def spec_problems(
    spec: StreamJobSpec | ReconfigurationSpec,
    allow: AllowList | None = None,
    *,
    missing_ok: bool = True,
    prefix: str = "spec",
) -> list[FieldProblem]:
    """Admission for a whole spec: one `field: reason` per refused reference."""
    try:
        allow = allow if allow is not None else AllowList()
    except FunctionRefused as refused:  # a malformed SWIVEL_FUNCTION_PREFIXES
        return [FieldProblem(refused.field, refused.reason)]
    problems = []
    for where, ref in references(spec, prefix):
        try:
            check_reference(ref, allow, where, missing_ok=missing_ok)
        except FunctionRefused as refused:
            problems.append(FieldProblem(refused.field, refused.reason))
    return problems


@lru_cache(maxsize=512)
def _static_problem(module: str, parts: tuple[str, ...], missing_ok: bool) -> str | None:
    source = _module_source(module)
    if source is None:
        return None if missing_ok else f"names module {module!r}, which is not installed"
    if isinstance(source, str) and source.startswith("!"):
        return source[1:]
    try:
        tree = ast.parse(source, filename=module)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"names module {module!r}, whose source does not parse"
    return _defined_in(tree.body, parts, f"module {module!r}")


def _module_source(module: str) -> str | None:
    """The module's source text, found as the import system would, with no code executed
    (find_spec on each package level uses its search locations, never its `__init__`).
    None when its top-level package is not installed here; a string starting with "!" is a
    refusal."""
    path: list[str] | None = None
    spec = None
    names = module.split(".")
    for depth in range(len(names)):
        qualified = ".".join(names[: depth + 1])
        spec = _find_spec(qualified, path)
        if spec is None and depth == 0:
            return None  # the whole package is not installed here: nothing to read
        if spec is None:  # its package is here, so the module does not exist
            return f"!names module {module!r}, which does not exist ({qualified!r} not found)"
        if depth < len(names) - 1:
            if spec.submodule_search_locations is None:
                return f"!names module {module!r}, but {qualified!r} is not a package"
            path = list(spec.submodule_search_locations)
    assert spec is not None
    origin = spec.origin
    if not origin or not origin.endswith(".py"):
        return f"!names module {module!r}, which is not Python source (cannot be checked)"
    try:
        file = Path(origin)
        if file.stat().st_size > MAX_SOURCE_BYTES:
            return f"!names module {module!r}, larger than {MAX_SOURCE_BYTES} bytes"
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"!names module {module!r}, whose source cannot be read"


def _find_spec(name: str, path: list[str] | None):  # type: ignore[no-untyped-def]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, path)
        except (ImportError, ValueError, OSError):
            continue
        if spec is not None:
            return spec
    return None


def _defined_in(body: list[ast.stmt], parts: tuple[str, ...], scope: str) -> str | None:
    """None when `parts` names a function defined in `body` (a module's or a class's)."""
    name, rest = parts[0], parts[1:]
    bindings = list(_bindings(body, name))
    if not bindings:
        return f"is not defined in {scope}"
    kinds = {kind for kind, _, _ in bindings}
    if rest:
        if kinds != {"class"}:
            return f"reaches {name!r}, which is not a class defined in {scope}"
        node = bindings[-1][2]
        assert isinstance(node, ast.ClassDef)
        return _defined_in(node.body, rest, f"class {name!r} of {scope}")
    if kinds == {"function"}:
        return None
    kind, line, _ = next(b for b in bindings if b[0] != "function")
    what = "a class (not a function)" if kind == "class" else "not a function defined there"
    return f"names {name!r} in {scope}, which is {what} (bound at line {line})"


Binding = tuple[str, int, ast.AST]  # ("function" | "class" | "other", line, node)


def _bindings(body: list[ast.stmt], name: str) -> Iterator[Binding]:
    """Every statement of this scope that binds `name` (descending into if/try/with/for
    blocks, which share the scope, but not into functions or classes). Only a `def` or a
    lambda assigned to the plain name counts as a function; an `async def` does not (the
    workers call functions synchronously)."""
    for node in body:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            if node.name == name:
                kind = {ast.FunctionDef: "function", ast.ClassDef: "class"}.get(type(node), "other")
                yield kind, line, node
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if _binds(target, name):
                    is_lambda = isinstance(target, ast.Name) and isinstance(node.value, ast.Lambda)
                    yield ("function" if is_lambda else "other"), line, node
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name or alias.name == "*":
                    yield "other", line, node
            continue
        if isinstance(node, ast.For | ast.AsyncFor) and _binds(node.target, name):
            yield "other", line, node
        if isinstance(node, ast.With | ast.AsyncWith) and any(
            item.optional_vars is not None and _binds(item.optional_vars, name)
            for item in node.items
        ):
            yield "other", line, node
        if any(isinstance(n, ast.NamedExpr) and _binds(n.target, name) for n in ast.walk(node)):
            yield "other", line, node
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(node, block, None)
            if isinstance(inner, list):
                yield from _bindings([s for s in inner if isinstance(s, ast.stmt)], name)
        for handler in getattr(node, "handlers", None) or ():
            if isinstance(handler, ast.ExceptHandler):
                if handler.name == name:
                    yield "other", getattr(handler, "lineno", line), handler
                yield from _bindings(handler.body, name)


def _binds(target: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))
