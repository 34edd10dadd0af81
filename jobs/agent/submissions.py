"""From a `POST /v1/plans` body to what the hub publishes, refusing bad input early.

Three outcomes for bad input, all before anything touches the running job: 400 when the
body is not a well-formed Reconfiguration (`{"errors": [{"field", "reason"}]}`), 422 when it
is well formed but names something the job does not have or plans a switch Spark cannot
carry out consistently (`runtime_refusals`, after planning), and 409 (decided by the hub)
when another plan is in flight. Planning is `swivel.controllers.planning`, injected so tests can
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
from swivel.controllers.planning import (
    codeless_operators,
    evaluated_per_branch,
    plan_reconfiguration,
    refusals,
)
from swivel.protocol.answers import Errors
from swivel.protocol.bodies import SubmissionBody
from swivel.protocol.documents import BodyRejected
from swivel.protocol.snapshots import Component, OperatorConfig, Transition, scheduler_named

# (job, spec, the driver's placement for a rescale or moves) -> the plan document
Planner = Callable[
    [StreamJobSpec, ReconfigurationSpec, Mapping[int, str] | None], Mapping[str, Any]
]
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

    def document(self) -> Errors:
        """The answer: one error per problem, and the plan in flight when busy (409)."""
        return Errors.of(self.problems, self.running_plan)


@dataclass(frozen=True)
class Submission:
    name: str
    spec: ReconfigurationSpec
    scheduler: str
    requested_at: float | None
    idempotency_key: str | None = None  # the same key again answers the same plan


def default_planner(
    job: StreamJobSpec, spec: ReconfigurationSpec, placement: Mapping[int, str] | None = None
) -> Mapping[str, Any]:
    """The one planning call for a running job (`swivel plan` makes the same one for a dry
    run, given a placement): a migration from the placement the driver reported."""
    return plan_reconfiguration(job, spec, current_assignment=placement).to_dict()


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
    unprocessable += refused_functions(spec)
    if unprocessable:
        raise PlanRejected(422, unprocessable)
    return Submission(name, spec, scheduler, requested_at, key)


def body_fields(body: Any) -> SubmissionBody | list[FieldProblem]:
    """The submission's fields other than the spec, or the problems with them."""
    try:
        return SubmissionBody.parse(body)
    except BodyRejected as error:
        return [p for p in error.problems if not p.field.startswith("spec")]


def refused_functions(spec: ReconfigurationSpec) -> list[FieldProblem]:
    """Function references outside the installation's allow-list (`swivel.api.functions`),
    refused before anything is published. The agent runs in the job's image, so a module
    that is not installed here is refused too (the workers could not import it either)."""
    from swivel.api.functions import spec_problems

    return spec_problems(spec, missing_ok=False)


def runtime_refusals(
    plan: Mapping[str, Any], job: StreamJobSpec, submission: Submission
) -> list[FieldProblem]:
    """What Spark cannot carry out consistently in `plan` under the submission's scheduler
    (`swivel.controllers.planning.refusals`, the function `swivel plan` and the operator's
    plan use too): a Fries head or a naive target that Spark evaluates once per branch of
    a split, or a head that runs no code. Known only after planning; the hub answers 422
    before anything is published."""
    components = [
        (tuple(c.get("heads", ())), tuple(c.get("targets", ()))) for c in plan.get("components", ())
    ]
    return [
        FieldProblem(refusal.field, refusal.reason)
        for refusal in refusals(
            submission.scheduler,
            submission.spec.targets,
            components,
            per_branch=evaluated_per_branch(job),
            codeless=codeless_operators(job),
        )
    ]


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
        scheduler=scheduler_named(scheduler),
        from_config_version=from_config_version,
        to_config_version=from_config_version + 1,
        previous={op: current[op] for op in spec.targets},
        components=components,
        apply_from_batch=apply_from_batch if scheduler == "epoch" else None,
    )
