"""From a `POST /v1/plans` body to what the hub publishes, refusing bad input early.

Three outcomes for bad input, all before anything touches the running job: 400 when the
body is not a well-formed Reconfiguration (`{"errors": [{"field", "reason"}]}`), 422 when it
is well formed but names something the job does not have, and 409 (decided by the hub) when
another plan is in flight. Planning is `swivel.controllers.planning`, injected so tests can
substitute a small planner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from swivel.api.errors import FieldProblem, SpecError, problems_from
from swivel.api.reconfiguration import ReconfigurationSpec, validate_against_job
from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent.wire import BodyRejected, SubmissionBody
from swivel.jobs.control.snapshots import Component, OperatorConfig, Transition

Planner = Callable[[StreamJobSpec, ReconfigurationSpec], Mapping[str, Any]]
SCHEDULER_OVERRIDES = ("naive",)  # benchmark only: no MCS, every target on its own
MAX_IDEMPOTENCY_KEY = 512


class PlanRejected(Exception):  # noqa: N818 - reads as the outcome, like AgentRejected
    """A refused submission: the HTTP status and one problem per field."""

    def __init__(
        self, status: int, problems: Sequence[FieldProblem], running_plan: str | None = None
    ) -> None:
        self.status = status
        self.problems = tuple(problems)
        self.running_plan = running_plan
        super().__init__("; ".join(str(p) for p in self.problems))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "errors": [{"field": p.field, "reason": p.reason} for p in self.problems]
        }
        if self.running_plan is not None:
            body["runningPlan"] = self.running_plan
        return body


@dataclass(frozen=True)
class Submission:
    name: str
    spec: ReconfigurationSpec
    scheduler: str
    requested_at: float | None
    idempotency_key: str | None = None  # the same key again answers the same plan


def default_planner(job: StreamJobSpec, spec: ReconfigurationSpec) -> Mapping[str, Any]:
    from swivel.controllers.planning import plan_reconfiguration

    return plan_reconfiguration(job, spec).to_dict()


def parse_submission(
    body: Any, job: StreamJobSpec, job_name: str, *, migrations: bool = False
) -> Submission:
    """Validate the body (400) and check it against the job (422)."""
    if not isinstance(body, dict):
        raise PlanRejected(400, [FieldProblem("body", "expected a JSON object {name, spec}")])
    problems: list[FieldProblem] = []
    fields = body_fields(body)  # the envelope as a strict model (wire.SubmissionBody)
    if isinstance(fields, list):
        problems += fields
    try:
        spec = ReconfigurationSpec.model_validate(body.get("spec"))
    except ValidationError as error:
        problems += problems_from(error, prefix="spec")
    if problems or isinstance(fields, list):
        raise PlanRejected(400, problems)
    name, override, key = fields.name, fields.scheduler_override, fields.idempotency_key
    requested_at = fields.requested_at
    try:
        validate_against_job(spec, job)
    except SpecError as error:
        raise PlanRejected(422, error.problems) from None
    unprocessable = []
    if spec.job_ref.name != job_name:
        unprocessable.append(FieldProblem("spec.jobRef.name", f"this agent runs job {job_name!r}"))
    if (spec.rescale or spec.moves) and not migrations:
        unprocessable.append(
            FieldProblem(
                "spec",
                "rescale and moves need a driver that migrates bins "
                "(agent started with SWIVEL_AGENT_MIGRATIONS=1, docs/migration.md)",
            )
        )
    if spec.coordination is not None and not migrations:
        unprocessable.append(
            FieldProblem(
                "spec.coordination",
                "the coordination interval needs a driver that measures loads "
                "(agent started with SWIVEL_AGENT_MIGRATIONS=1, docs/migration.md)",
            )
        )
    scheduler = override or spec.scheduler.value
    unprocessable += _switches_above_a_split(spec, job, scheduler)
    if unprocessable:
        raise PlanRejected(422, unprocessable)
    return Submission(name, spec, scheduler, requested_at, key)


def body_fields(body: Any) -> SubmissionBody | list[FieldProblem]:
    """The submission's fields other than the spec, or the problems with them."""
    try:
        return SubmissionBody.parse(body)  # type: ignore[no-any-return]
    except BodyRejected as error:
        return [p for p in error.problems if not p.field.startswith("spec")]


def _switches_above_a_split(
    spec: ReconfigurationSpec, job: StreamJobSpec, scheduler: str
) -> list[FieldProblem]:
    """Refuse a switch inside a micro-batch of an operator Spark evaluates once per branch.

    Above a split (`swivel.jobs.runtime.shapes`: a fan-out whose branches meet only after
    a keyed operator, or end in different sinks) Spark runs the operator once per branch;
    a switch between those runs would give one record both versions, which no tag can
    repair. A boundary switch (epoch, restart) is consistent there.
    """
    if scheduler not in ("fries", "naive"):
        return []
    replicated = _replicated(job)
    return [
        FieldProblem(
            f"spec.functionUpdates[{index}].operator",
            f"{update.operator!r} runs once per branch of a split in this dataflow "
            "(docs/runtime.md, Splits), so a switch within a micro-batch could give one "
            f"record both versions; use scheduler: epoch (or restart), not {scheduler}",
        )
        for index, update in enumerate(spec.function_updates)
        if update.operator in replicated
    ]


def heads_above_a_split(
    plan: Mapping[str, Any], job: StreamJobSpec, scheduler: str
) -> list[FieldProblem]:
    """Refuse a Fries plan one of whose heads Spark evaluates once per branch of a split.

    A head need not be a target: the planner makes the earliest one-to-many ancestor of the
    targets a head (`swivel.controllers.mcs`), and that head stamps each record's tag. Run
    once per branch, in different tasks, it may stamp one record old in one branch and new
    in the other, and the record reaches the targets under both versions. Known only after
    planning; the targets themselves were refused before (`parse_submission`).
    """
    if scheduler != "fries":
        return []  # naive has no heads; its targets were checked before planning
    replicated = _replicated(job)
    problems = []
    for component in plan.get("components", ()):
        targets = sorted(component.get("targets", ()))
        for head in component.get("heads", ()):
            if head in replicated:
                problems.append(
                    FieldProblem(
                        "spec.scheduler",
                        f"fries would switch at {head!r}, the head of the component of "
                        f"{targets}, and {head!r} runs once per branch of a split in this "
                        "dataflow (docs/runtime.md, Splits), so one record could reach them "
                        "under both versions; use scheduler: epoch (or restart)",
                    )
                )
    return problems


def _replicated(job: StreamJobSpec) -> frozenset[str]:
    """The operators Spark evaluates once per branch (`swivel.jobs.runtime.shapes`)."""
    from swivel.jobs.runtime.shapes import CompileError, plan_shape

    try:
        return frozenset(plan_shape(job).replicated)
    except CompileError:
        return frozenset()  # the driver refuses the job itself, with its own field


def initial_operators(job: StreamJobSpec) -> dict[str, OperatorConfig]:
    """Every operator at function version 1, as the job starts."""
    return {
        op.name: OperatorConfig(function=op.function, version=1, params=dict(op.params))
        for op in job.dataflow.operators
    }


def updated_operators(
    current: Mapping[str, OperatorConfig], spec: ReconfigurationSpec
) -> dict[str, OperatorConfig]:
    """Each target one function version up; params are replaced, the function kept if omitted."""
    operators = dict(current)
    for update in spec.function_updates:
        old = current[update.operator]
        operators[update.operator] = OperatorConfig(
            function=update.function or old.function,
            version=old.version + 1,
            params=dict(update.params),
            state_transform=update.state_transform,
        )
    return operators


def build_transition(
    *,
    plan_id: str,
    scheduler: str,
    plan: Mapping[str, Any],
    current: Mapping[str, OperatorConfig],
    spec: ReconfigurationSpec,
    from_config_version: int,
    apply_from_batch: int | None,
) -> Transition:
    components: tuple[Component, ...] = ()
    if scheduler == "fries":
        components = tuple(
            Component(id=index, heads=tuple(c["heads"]), operators=tuple(c["operators"]))
            for index, c in enumerate(plan.get("components", ()))
        )
    return Transition(
        id=plan_id,
        scheduler=scheduler,
        from_config_version=from_config_version,
        to_config_version=from_config_version + 1,
        previous={op: current[op] for op in spec.targets},
        components=components,
        apply_from_batch=apply_from_batch if scheduler == "epoch" else None,
    )
