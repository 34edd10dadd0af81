"""What `shapes.plan_shape` refuses, per operator, and the column rule of a merge.

Refused with a `CompileError(field, reason)` naming the field
(`spec.dataflow.operators[X]...`): not exactly one source, branches that do not end in a
sink, joins (stream-stream joins are out of scope), broadcast edges (in one query a
broadcast means "every row to every worker of the consumer", which only a join would use),
a keyed operator without a key or fed by a hash edge on another key, a stateless operator
mixing hash and forward in-edges or hash edges on different keys, an operator without a
function (a `union` may have none: it only merges; a `replicate` must have one, because it
can head a Fries component and only Python code can stamp the tag). A keyed operator that a
split would run once per branch is refused by `shapes` itself, where splits are found.

Merges (an operator or the sink with several inputs) need the same user columns with the
same types on every input; `_swivel_*` columns missing on one input (say the
`_swivel_emitted_at` an operator adds) are filled with nulls (`merged_columns`).

Split from `shapes` to keep each module readable; `shapes` re-exports `CompileError` and
`merged_columns`, the names the rest of the code imports.
"""

from __future__ import annotations

from collections.abc import Sequence

from swivel.api.dataflow import OperatorKind, OperatorSpec
from swivel.api.vocabulary import Partitioning

SYSTEM_PREFIX = "_swivel_"


class CompileError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def field_of(name: str, suffix: str = "") -> str:
    return f"spec.dataflow.operators[{name}]{suffix}"


def check_operator(op: OperatorSpec, consumers: Sequence[str]) -> None:
    name = op.name
    if op.kind is OperatorKind.SINK:
        if consumers:
            raise CompileError(field_of(name), f"a sink feeds nothing (it feeds {list(consumers)})")
        return
    if not consumers:
        raise CompileError(
            field_of(name),
            f"{op.kind.value} operator {name!r} feeds nothing: end every branch in a sink",
        )
    if op.kind is OperatorKind.SOURCE:
        return
    if op.kind is OperatorKind.JOIN:
        raise CompileError(
            field_of(name, ".kind"), "stream-stream joins are not supported by the runtime"
        )
    for position, edge in enumerate(op.inputs):
        if edge.partitioning is Partitioning.BROADCAST:
            raise CompileError(
                field_of(name, f".inputs[{position}].partitioning"),
                "broadcast edges are not supported: in one query a broadcast means every row "
                "reaches every worker of the consumer, which only a join would use (and "
                "stream-stream joins are not supported)",
            )
    if op.function is None and op.kind is not OperatorKind.UNION:
        reason = "needs a function"
        if op.kind is OperatorKind.REPLICATE:
            reason += (
                " (a replicate can head a Fries component, and only an operator's Python "
                "code stamps the tag; an identity function is enough)"
            )
        raise CompileError(field_of(name, ".function"), reason)
    if op.kind is OperatorKind.KEYED:
        if not op.key:
            raise CompileError(field_of(name, ".key"), "a keyed operator needs a key")
        for position, edge in enumerate(op.inputs):
            if edge.partitioning is Partitioning.HASH and edge.key not in (None, op.key):
                raise CompileError(
                    field_of(name, f".inputs[{position}].key"),
                    f"a keyed operator's state is binned by its key {op.key!r}; a hash edge "
                    f"by {edge.key!r} would be reshuffled anyway",
                )
        return
    hash_key(op)  # checks mixed / inconsistent hash edges


def hash_key(op: OperatorSpec) -> str | None:
    """The key a stateless operator's input is repartitioned by (None: forward in-edges)."""
    hashed = [(i, e) for i, e in enumerate(op.inputs) if e.partitioning is Partitioning.HASH]
    if not hashed:
        return None
    if len(hashed) != len(op.inputs):
        raise CompileError(
            field_of(op.name, ".inputs"),
            "mixes hash and forward in-edges; a merge is repartitioned as a whole, so make "
            "them all hash (same key) or all forward",
        )
    keys = {edge.key or op.key for _, edge in hashed}
    if None in keys:
        position = next(i for i, e in hashed if not (e.key or op.key))
        raise CompileError(field_of(op.name, f".inputs[{position}].key"), "a hash edge needs a key")
    if len(keys) > 1:
        raise CompileError(
            field_of(op.name, ".inputs"), f"hash edges on different keys {sorted(map(str, keys))}"
        )
    return next(iter(keys))


def merged_columns(
    merge: str, inputs: Sequence[tuple[str, Sequence[tuple[str, str]]]]
) -> tuple[tuple[str, str], ...]:
    """The columns (name, type) of a merge of `inputs` [(field, columns)], first input's order.

    Every input must carry the same user columns with the same types, else CompileError
    on that input's field; `_swivel_*` columns are the union over the inputs (missing ones
    become nulls), appended in order of appearance.
    """
    first_field, first = inputs[0]
    merged = list(first)
    types = dict(first)
    user = {c for c, _ in first if not c.startswith(SYSTEM_PREFIX)}
    for field_name, columns in inputs[1:]:
        mine = dict(columns)
        mine_user = {c for c in mine if not c.startswith(SYSTEM_PREFIX)}
        problems = []
        if user - mine_user:
            problems.append(f"missing {sorted(user - mine_user)}")
        if mine_user - user:
            problems.append(f"extra {sorted(mine_user - user)}")
        for column, kind in columns:
            if column in types and types[column] != kind:
                problems.append(f"{column} is {kind}, not {types[column]}")
            elif column not in types:  # a system column the first input lacks
                types[column] = kind
                merged.append((column, kind))
        if problems:
            raise CompileError(
                field_name,
                f"{merge} merges inputs whose columns differ from {first_field}: "
                + "; ".join(problems),
            )
    return tuple(merged)
