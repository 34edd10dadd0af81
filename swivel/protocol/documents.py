"""What every protocol document shares: its base class, its limits and the JSON reader.

Every body is read by `read_json` (finite numbers only, integers within 64 bits, nesting
at most `MAX_DEPTH` deep; the size is bounded by the app's `client_max_size`) and then
validated against its model *before* the hub changes anything, so a bad field is a 400
naming it and never half a change. Query parameters are checked the same way
(`query_int`, `query_seconds`). `BodyRejected` carries `field: reason` problems; the app
answers them as `{"errors": [{"field", "reason"}]}`.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Self

from pydantic import ConfigDict, Field, ValidationError

from swivel.api.base import WireDocument
from swivel.api.errors import FieldProblem, problems_from

MAX_DEPTH = 32  # the deepest honest document (a migration report) is 5 levels
INT_LIMIT = 2**63  # batch ids, seqs, counts: Spark's longs
# The longest a plan's long-poll waits (`GET /v1/plans/{id}?timeout=`), shorter than a watch:
# its followers (the operator, the CLI) time out their requests too, and a shorter wait
# bounds how long a stopped follower keeps a connection.
MAX_PLAN_WAIT_S = 30.0
MAX_TEXT = 4096
MAX_NAME = 253  # a Kubernetes object name
LATEST_TIME = 253402300799.0  # 9999-12-31T23:59:59Z: beyond it no timestamp can be shown
MAX_PID = 2**32  # worker ids: process ids, or ids the agent hands out below this

Long = Annotated[int, Field(ge=0, lt=INT_LIMIT)]
Seconds = Annotated[float, Field(ge=0, le=LATEST_TIME, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
WorkerId = Annotated[int, Field(ge=0, lt=MAX_PID)]


class BodyRejected(ValueError):  # noqa: N818 - reads as the outcome, like PlanRejected
    def __init__(self, problems: list[FieldProblem], status: int = 400) -> None:
        self.problems, self.status = problems, status
        super().__init__("; ".join(str(p) for p in problems))

    @classmethod
    def single(cls, field: str, reason: str, status: int = 400) -> BodyRejected:
        return cls([FieldProblem(field, reason)], status)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (numbers must be finite)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a number (numbers must be finite)")
    return value


def _long(text: str) -> int:
    if len(text) > 20 or not -INT_LIMIT <= (value := int(text)) < INT_LIMIT:
        raise ValueError(f"{text[:40]}... does not fit in 64 bits")
    return value


def _depth(document: Any) -> int:
    """How deeply arrays and objects nest (iterative: never recurses on hostile input)."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def read_json(raw: bytes) -> Any:
    """The JSON document of a body, or BodyRejected (`body: reason`)."""
    try:
        document = json.loads(
            raw, parse_constant=_no_constant, parse_float=_finite, parse_int=_long
        )
    except RecursionError:
        raise BodyRejected.single("body", f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise BodyRejected.single("body", f"not valid JSON: {str(error)[:200]}") from None
    if _depth(document) > MAX_DEPTH:
        raise BodyRejected.single("body", f"nested deeper than {MAX_DEPTH} levels")
    return document


def query_int(raw: str | None, name: str, default: int, *, upper: int = INT_LIMIT) -> int:
    """A non-negative integer query parameter below `upper`."""
    if raw is None or raw == "":
        return default
    if len(raw) > 20 or not raw.isascii() or not raw.isdigit() or int(raw) >= upper:
        raise BodyRejected.single(
            name, f"expected an integer from 0 to {upper - 1}, got {raw[:40]!r}"
        )
    return int(raw)


def query_seconds(raw: str | None, name: str, default: float, upper: float) -> float:
    """A finite number of seconds, clamped to [0, upper]."""
    if raw is None:
        return default
    try:
        value = float(raw) if len(raw) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BodyRejected.single(name, f"expected seconds (a finite number), got {raw[:40]!r}")
    return min(max(value, 0.0), upper)


class Document(WireDocument):
    """A document that crosses a process boundary: one model reads it (`parse`, refusing a
    bad one as `BodyRejected`) and writes it (`to_wire`), so both sides agree by type. A
    string under a field is its description in the agent's OpenAPI document."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    @classmethod
    def parse(cls, body: Any, prefix: str = "") -> Self:
        try:
            return cls.model_validate(body)
        except ValidationError as error:
            problems = [
                FieldProblem(p.field or "body", p.reason) for p in problems_from(error, prefix)
            ]
            raise BodyRejected(problems) from None

    def to_wire(self) -> dict[str, Any]:
        """The JSON form: camelCase, every field (null ones too: the answer says it)."""
        return self.model_dump(mode="json", by_alias=True)
