"""Classifying an edit of a StreamJob spec field by field (after Flink's SpecDiff).

Every spec field declares how disruptive a change to it is (`Annotated[T, Disruption.X]`).
An edit's disruption is the maximum over the fields it changes, so a GitOps user who only
edits a function's params gets a live control message, and one who edits the source gets a
graceful restart. Unmarked fields inherit their parent's mark; the default is RESTART, the
safe answer for anything nobody thought about.

Operators are matched by name, not position: reordering the list is not a change, while
adding, removing or rewiring an operator changes the dataflow's shape (a restart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from swivel.api.base import Disruption
from swivel.api.dataflow import DataflowSpec
from swivel.api.errors import join_path


@dataclass(frozen=True)
class FieldChange:
    field: str
    disruption: Disruption


@dataclass(frozen=True)
class SpecDiff:
    changes: tuple[FieldChange, ...]

    @property
    def disruption(self) -> Disruption:
        return max((c.disruption for c in self.changes), default=Disruption.NONE)

    def fields(self, disruption: Disruption) -> tuple[str, ...]:
        return tuple(c.field for c in self.changes if c.disruption is disruption)


def diff_specs(old: BaseModel, new: BaseModel) -> SpecDiff:
    """Every leaf field that differs between two specs of the same model, with its mark."""
    return SpecDiff(tuple(_diff(old, new, ("spec",), Disruption.RESTART)))


def _mark(model: type[BaseModel], name: str, inherited: Disruption) -> Disruption:
    marks = [m for m in model.model_fields[name].metadata if isinstance(m, Disruption)]
    return marks[0] if marks else inherited


def _diff(old: Any, new: Any, path: tuple[str | int, ...], mark: Disruption) -> list[FieldChange]:
    if isinstance(old, DataflowSpec) and isinstance(new, DataflowSpec):
        return _diff_dataflow(old, new, path, mark)
    if isinstance(old, BaseModel) and type(old) is type(new):
        changes: list[FieldChange] = []
        for name, info in type(old).model_fields.items():
            wire = info.alias or name
            changes += _diff(
                getattr(old, name), getattr(new, name), (*path, wire), _mark(type(old), name, mark)
            )
        return changes
    return [] if old == new else [FieldChange(join_path(path), mark)]


def _diff_dataflow(
    old: DataflowSpec, new: DataflowSpec, path: tuple[str | int, ...], mark: Disruption
) -> list[FieldChange]:
    changes = _diff(old.bins, new.bins, (*path, "bins"), _mark(DataflowSpec, "bins", mark))
    old_ops = {op.name: op for op in old.operators}
    new_ops = {op.name: op for op in new.operators}
    if old_ops.keys() != new_ops.keys():
        return [*changes, FieldChange(join_path((*path, "operators")), Disruption.RESTART)]
    for index, op in enumerate(new.operators):
        changes += _diff(old_ops[op.name], op, (*path, "operators", index), mark)
    return changes
