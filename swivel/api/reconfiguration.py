"""The Reconfiguration custom resource: one change to a running StreamJob.

A Reconfiguration is the imperative form (update these functions, rescale to n executors,
move these bins, with this scheduler and migration strategy); editing a StreamJob's spec is
the declarative one. Both are planned by `swivel.controllers.planning`.

`validate_against_job` holds the checks that need the job (operators and bins that must
exist); the model itself only checks what it can see alone.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, model_validator

from swivel.api.base import ApiModel, Disruption, Resource
from swivel.api.conditions import Condition
from swivel.api.dataflow import FUNCTION_REF_PATTERN, OPERATOR_NAME_PATTERN
from swivel.api.errors import FieldProblem, SpecError, semantic_error
from swivel.api.phases import ReconfigurationPhase
from swivel.api.streamjob import StreamJobSpec


class Scheduler(enum.StrEnum):
    FRIES = "fries"  # fast control messages, MCS components synchronised by tags
    EPOCH = "epoch"  # switch at the next micro-batch boundary
    RESTART = "restart"  # stop the query, restart from the checkpoint with the new code


class MigrationStrategy(enum.StrEnum):
    ALL_AT_ONCE = "all-at-once"
    FLUID = "fluid"
    BATCHED = "batched"


class JobRef(ApiModel):
    name: str = Field(min_length=1, max_length=253)


class FunctionUpdate(ApiModel):
    operator: str = Field(pattern=OPERATOR_NAME_PATTERN)
    function: str | None = Field(
        default=None,
        pattern=FUNCTION_REF_PATTERN,
        description="New module:callable; omitted = keep the function, change params only.",
    )
    params: dict[str, Any] = Field(default_factory=dict)
    state_transform: str | None = Field(
        default=None,
        pattern=FUNCTION_REF_PATTERN,
        description="module:callable applied once per key to old state, lazily and idempotently.",
    )


class Rescale(ApiModel):
    executors: int = Field(ge=1, le=1000)


class BinMove(ApiModel):
    bins: list[int] = Field(min_length=1)
    to: str = Field(min_length=1, description="Executor id that receives the bins.")


class MigrationSpec(ApiModel):
    strategy: MigrationStrategy = MigrationStrategy.BATCHED
    batch_size: int = Field(default=4, ge=1, le=32768, description="Bins per step (batched).")
    gap_batches: int = Field(default=0, ge=0, le=100, description="Quiet batches between steps.")
    prewarm: bool = Field(
        default=True,
        description="Load each step's bins on their targets while the old owners still serve "
        "them, and switch the step at the first boundary after (Megaphone: state ahead of the "
        "switch); the batch after the switch then does not reload them from the checkpoint. "
        "Needs the helper jar (built with a JDK; in the image); where it cannot run, bins "
        "move the plain way and status.progress.prewarmFallback says why. false: every step "
        "switches at once and its bins reload in the batch after.",
    )


class CoordinationSpec(ApiModel):
    """Drizzle's coordination interval: seconds between two load measurements (and policy
    rounds) on the driver, apart from the trigger (processing) interval. The driver takes it
    at once, without moving anything (the AIMD policy sets it)."""

    interval_seconds: float = Field(
        ge=0.1,
        le=3600.0,
        description="Seconds between two load measurements on the driver (0.1 .. 3600).",
    )


class ReconfigurationSpec(ApiModel):
    job_ref: JobRef
    function_updates: list[FunctionUpdate] = Field(default_factory=list)
    rescale: Rescale | None = None
    moves: list[BinMove] = Field(default_factory=list)
    migration: MigrationSpec = Field(default_factory=MigrationSpec)
    scheduler: Scheduler = Scheduler.FRIES
    coordination: Annotated[CoordinationSpec | None, Disruption.LIVE_CONTROL] = Field(
        default=None,
        description="Drizzle's coordination interval for the driver (live: a driver action).",
    )

    @model_validator(mode="after")
    def _changes_something(self) -> ReconfigurationSpec:
        if not (self.function_updates or self.rescale or self.moves or self.coordination):
            raise semantic_error(
                "functionUpdates",
                "an empty reconfiguration: give functionUpdates, rescale or moves",
            )
        seen: dict[str, int] = {}
        for index, update in enumerate(self.function_updates):
            if update.operator in seen:
                raise semantic_error(
                    f"functionUpdates[{index}].operator",
                    f"operator {update.operator!r} is updated twice "
                    f"(also functionUpdates[{seen[update.operator]}])",
                )
            seen[update.operator] = index
        moved: dict[int, int] = {}  # a bin has one destination: the planner relies on it
        for index, move in enumerate(self.moves):
            if len(set(move.bins)) != len(move.bins):
                raise semantic_error(f"moves[{index}].bins", "a bin is listed twice")
            for position, bin_id in enumerate(move.bins):
                if bin_id in moved:
                    raise semantic_error(
                        f"moves[{index}].bins[{position}]",
                        f"bin {bin_id} is moved twice (also moves[{moved[bin_id]}])",
                    )
                moved[bin_id] = index
        return self

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(update.operator for update in self.function_updates)


def validate_against_job(spec: ReconfigurationSpec, job: StreamJobSpec) -> None:
    """Raise SpecError naming each field that refers to something the job does not have."""
    problems: list[FieldProblem] = []
    operators = {op.name: op for op in job.dataflow.operators}
    for index, update in enumerate(spec.function_updates):
        op = operators.get(update.operator)
        if op is None:
            known = ", ".join(sorted(operators))
            problems.append(
                FieldProblem(
                    f"spec.functionUpdates[{index}].operator",
                    f"the job has no operator {update.operator!r} (operators: {known})",
                )
            )
        elif op.kind.value in {"source", "sink"} and update.function is not None:
            problems.append(
                FieldProblem(
                    f"spec.functionUpdates[{index}].function",
                    f"{op.kind.value} {op.name!r} has no function to replace; change spec.{op.kind.value}",
                )
            )
    bins = job.dataflow.bins
    for index, move in enumerate(spec.moves):
        bad = [b for b in move.bins if not 0 <= b < bins]
        if bad:
            problems.append(
                FieldProblem(f"spec.moves[{index}].bins", f"bins {bad} out of range [0, {bins})")
            )
    if problems:
        raise SpecError(problems)


MAX_HAND_OVERS = 16  # hand-overs a status lists (the latest); the plan lists them all
MAX_LISTED_BINS = 64  # bins a status hand-over lists; `binCount` counts them all


class HandOverStatus(ApiModel):
    """One hand-over the driver carried out, as it happened (Chi's order; docs/migration.md)."""

    step: int = Field(ge=1, description="The plan step (1-based) it belongs to.")
    from_: str = Field(alias="from", description="The giver: the executor the bins left.")
    to: str = Field(description="The taker: the executor the plan hands the bins to.")
    bins: list[int] = Field(
        default_factory=list, max_length=MAX_LISTED_BINS, description="The bins, in order."
    )
    bin_count: int = Field(default=0, ge=0, description="How many bins (bins lists the first).")
    batch: int | None = Field(
        default=None,
        ge=0,
        description="The first micro-batch planned to run them on the taker (they were "
        "re-pointed at the boundary before it); null: an earlier driver did.",
    )
    landed: int = Field(default=0, ge=0, description="Bins that ran on the taker.")
    elsewhere: list[int] = Field(
        default_factory=list,
        max_length=MAX_LISTED_BINS,
        description="Bins served by another executor than the taker (reported, not dropped).",
    )

    @classmethod
    def latest(cls, reported: Sequence[Mapping[str, Any]]) -> list[HandOverStatus]:
        """The status's bounded view of the driver's hand-over report (`handOver` of its
        migration progress): the latest MAX_HAND_OVERS, each listing at most MAX_LISTED_BINS."""
        return [
            cls.model_validate(
                {
                    "step": entry["step"],
                    "from": entry["from"],
                    "to": entry["to"],
                    "bins": list(entry["bins"])[:MAX_LISTED_BINS],
                    "binCount": len(entry["bins"]),
                    "batch": entry.get("batch"),
                    "landed": len(entry.get("landed") or ()),
                    "elsewhere": list(entry.get("elsewhere") or ())[:MAX_LISTED_BINS],
                }
            )
            for entry in list(reported)[-MAX_HAND_OVERS:]
        ]


class Progress(ApiModel):
    workers_switched: int = Field(default=0, ge=0)
    workers_total: int = Field(default=0, ge=0)
    bins_moved: int = Field(default=0, ge=0)
    bins_total: int = Field(default=0, ge=0)
    step: int = Field(default=0, ge=0)
    steps: int = Field(default=0, ge=0)
    hand_over: list[HandOverStatus] = Field(
        default_factory=list,
        max_length=MAX_HAND_OVERS,
        description="The latest hand-overs the driver carried out, in the order it made "
        "them (giver -> taker per plan step); status.plan lists the planned order.",
    )
    hand_overs: int = Field(default=0, ge=0, description="Hand-overs carried out so far.")
    bins_prewarmed: int = Field(
        default=0,
        ge=0,
        description="Bins switched onto a copy loaded ahead (spec.migration.prewarm).",
    )
    prewarm_fallback: str | None = Field(
        default=None,
        max_length=1024,
        description="Why bins moved the plain way although spec.migration.prewarm asked for it.",
    )


class Timings(ApiModel):
    requested_at: datetime | None = None
    accepted_at: datetime | None = None
    first_switch_at: datetime | None = None
    last_switch_at: datetime | None = None
    in_effect_at: datetime | None = Field(
        default=None,
        description="Every target ran records under its new version and none will run "
        "another under its old one (docs/benchmarks.md).",
    )
    completed_at: datetime | None = None


class ReconfigurationStatus(ApiModel):
    phase: ReconfigurationPhase = ReconfigurationPhase.PENDING
    observed_generation: int | None = Field(default=None, ge=0)
    conditions: list[Condition] = Field(default_factory=list)
    kind: str | None = Field(
        default=None, description="live-control | live-migration | restart (the plan's kind)."
    )
    delay_ms: float | None = Field(
        default=None,
        ge=0,
        description="The request -> the new version is in effect: every target ran records "
        "under it and none will run another under its old version (docs/benchmarks.md).",
    )
    armed_ms: float | None = Field(
        default=None,
        ge=0,
        description="The request -> the last worker hosting a target (or a Fries head) "
        "holds the new version; reported beside delayMs, never instead of it.",
    )
    agent_plan_id: str | None = Field(
        default=None,
        description="The agent's id for the submitted plan (resuming never resubmits).",
    )
    plan: dict[str, Any] | None = Field(default=None, description="What `swivel plan` prints.")
    progress: Progress | None = None
    timings: Timings | None = None
    message: str | None = None


class Reconfiguration(Resource):
    kind: str = "Reconfiguration"
    spec: ReconfigurationSpec
    status: ReconfigurationStatus | None = None
