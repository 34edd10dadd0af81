"""`spec.dataflow`: the operators of a streaming job and the facts the planners rely on.

The contract (README, "Dataflow") is what users write and what the planner, the runtime and
the tests agree on. Operator kinds are presets: a `replicate` is one-to-many with at most
one output per edge, a `flatMap` is one-to-many, an `aggregate` is blocking. Explicit flags
always win over a preset, so a user can describe an operator the presets do not know.
"""

from __future__ import annotations

import enum
import graphlib
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from swivel.api.base import ApiModel, Disruption
from swivel.api.errors import semantic_error
from swivel.api.vocabulary import Cardinality, Partitioning

OPERATOR_NAME_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_]{0,61}[A-Za-z0-9])?$"
FUNCTION_REF_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"
MAX_BINS = 32768
POWERS_OF_TWO = [2**i for i in range(MAX_BINS.bit_length())]


class OperatorKind(enum.StrEnum):
    SOURCE = "source"
    MAP = "map"
    FILTER = "filter"
    FLAT_MAP = "flatMap"
    KEYED = "keyed"
    JOIN = "join"
    UNION = "union"
    REPLICATE = "replicate"
    AGGREGATE = "aggregate"
    SINK = "sink"


# What each preset implies when the manifest does not say otherwise.
_PRESET_ONE_TO_MANY = {OperatorKind.FLAT_MAP, OperatorKind.REPLICATE}
_PRESET_AT_MOST_ONE_PER_EDGE = {OperatorKind.REPLICATE}
_PRESET_BLOCKING = {OperatorKind.AGGREGATE}


class InputSpec(ApiModel):
    """One in-edge. `inputs: [src]` is shorthand for `[{from: src, partitioning: forward}]`."""

    from_: str = Field(
        alias="from", pattern=OPERATOR_NAME_PATTERN, description="Upstream operator."
    )
    partitioning: Partitioning = Field(
        default=Partitioning.FORWARD,
        description="forward (worker i to worker i), hash (by key) or broadcast.",
    )
    key: str | None = Field(default=None, description="Key column for hash partitioning.")


# On the wire an input is a name or an object; the structural CRD schema cannot say
# "string or object", so an item is left free-form there and validated by the model.
InputItem = Annotated[
    InputSpec,
    WithJsonSchema(
        {
            "description": "An upstream operator name, or {from, partitioning, key}.",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    ),
]


class OperatorSpec(ApiModel):
    name: Annotated[str, Disruption.RESTART] = Field(
        pattern=OPERATOR_NAME_PATTERN, description="Unique, stable operator id (DNS-label-like)."
    )
    kind: Annotated[OperatorKind, Disruption.RESTART] = OperatorKind.MAP
    inputs: Annotated[list[InputItem], Disruption.RESTART] = Field(default_factory=list)
    cardinality: Annotated[Cardinality | None, Disruption.RESTART] = Field(
        default=None, description="one-to-one or one-to-many; defaults from the kind."
    )
    at_most_one_per_edge: Annotated[bool | None, Disruption.RESTART] = Field(
        default=None,
        description="A one-to-many operator emitting at most one tuple per input on each "
        "out-edge (a replicate). Enables Fries' edge-wise one-to-one pruning.",
    )
    unique_per_record: Annotated[bool, Disruption.RESTART] = Field(
        default=False,
        description="Emits at most one tuple per source record (e.g. a self-join on the "
        "primary key). Enables Fries' uniqueness pruning.",
    )
    blocking: Annotated[bool | None, Disruption.RESTART] = Field(
        default=None, description="Consumes all input before emitting; defaults from the kind."
    )
    parallelism: Annotated[int, Disruption.RESTART] = Field(
        default=1, ge=1, le=4096, description="Workers; forward edges need equal parallelism."
    )
    key: Annotated[str | None, Disruption.RESTART] = Field(
        default=None, description="Key column of a keyed operator (state is binned by it)."
    )
    function: Annotated[str | None, Disruption.LIVE_CONTROL] = Field(
        default=None,
        pattern=FUNCTION_REF_PATTERN,
        description="module:callable, resolved from the allow-list at run time.",
    )
    params: Annotated[dict[str, Any], Disruption.LIVE_CONTROL] = Field(
        default_factory=dict, description="Keyword parameters for the function."
    )

    @field_validator("inputs", mode="before")
    @classmethod
    def _expand_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"from": item} if isinstance(item, str) else item for item in value]
        return value

    @property
    def resolved_cardinality(self) -> Cardinality:
        if self.cardinality is not None:
            return self.cardinality
        one_to_many = self.kind in _PRESET_ONE_TO_MANY
        return Cardinality.ONE_TO_MANY if one_to_many else Cardinality.ONE_TO_ONE

    @property
    def resolved_at_most_one_per_edge(self) -> bool:
        if self.at_most_one_per_edge is not None:
            return self.at_most_one_per_edge
        return self.kind in _PRESET_AT_MOST_ONE_PER_EDGE

    @property
    def resolved_blocking(self) -> bool:
        return self.blocking if self.blocking is not None else self.kind in _PRESET_BLOCKING


class DataflowSpec(ApiModel):
    bins: Annotated[int, Disruption.RESTART] = Field(
        default=64,
        ge=1,
        le=MAX_BINS,
        json_schema_extra={"enum": POWERS_OF_TWO},
        description="Key bins = Spark state partitions; a power of two, fixed for the job "
        "(changing it is an offline repartition).",
    )
    operators: list[OperatorSpec] = Field(min_length=1)

    @field_validator("bins")
    @classmethod
    def _power_of_two(cls, bins: int) -> int:
        if bins & (bins - 1):
            raise ValueError(f"must be a power of two (got {bins})")
        return bins

    @model_validator(mode="after")
    def _well_formed(self) -> DataflowSpec:
        self._check_names_and_inputs()
        self._check_acyclic()
        self._check_forward_parallelism()
        return self

    def _check_names_and_inputs(self) -> None:
        first_index: dict[str, int] = {}
        for index, op in enumerate(self.operators):
            if op.name in first_index:
                raise semantic_error(
                    f"operators[{index}].name",
                    f"duplicate operator name {op.name!r} (first at operators[{first_index[op.name]}])",
                )
            first_index[op.name] = index
        for index, op in enumerate(self.operators):
            if op.kind is OperatorKind.SOURCE and op.inputs:
                raise semantic_error(f"operators[{index}].inputs", "a source has no inputs")
            if op.kind is not OperatorKind.SOURCE and not op.inputs:
                raise semantic_error(
                    f"operators[{index}].inputs",
                    f"{op.kind.value} operator {op.name!r} needs an input",
                )
            for position, edge in enumerate(op.inputs):
                if edge.from_ not in first_index:
                    raise semantic_error(
                        f"operators[{index}].inputs[{position}].from",
                        f"unknown operator {edge.from_!r}",
                    )

    def _check_acyclic(self) -> None:
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for op in self.operators:
            sorter.add(op.name, *(edge.from_ for edge in op.inputs))
        try:
            sorter.prepare()
        except graphlib.CycleError as cycle:
            path = " -> ".join(cycle.args[1])
            raise semantic_error("operators", f"the dataflow has a cycle: {path}") from None

    def _check_forward_parallelism(self) -> None:
        parallelism = {op.name: op.parallelism for op in self.operators}
        for index, op in enumerate(self.operators):
            for slot, edge in enumerate(op.inputs):
                if edge.partitioning is not Partitioning.FORWARD:
                    continue
                up, down = parallelism[edge.from_], op.parallelism
                if up != down:
                    raise semantic_error(
                        f"operators[{index}].inputs[{slot}].partitioning",
                        f"a forward edge needs equal parallelism ({edge.from_}: "
                        f"{up}, {op.name}: {down}); use hash",
                    )

    def operator(self, name: str) -> OperatorSpec | None:
        return next((op for op in self.operators if op.name == name), None)
