"""The plan intake: from a `POST /v1/plans` body to a durable, published configuration.

Bad input is refused before anything touches the running job: 400 when the body is not a
well-formed Reconfiguration (`{"errors": [{"field", "reason"}]}`), 422 when it is well
formed but names something the job does not have or plans a switch Spark cannot carry out
consistently, and 409 when another plan is in flight (or, for a rescale or moves, before the
driver has reported its placement).

The plan is made here, once: `plan_reconfiguration` (the function `swivel plan` calls for a
dry run) gives the Fries components and heads, the migration from the placement the driver
reported, and what Spark cannot carry out under the scheduler that will run it (the plan's
`refused`, answered with 422). Nothing plans or checks it again.

An acceptance then touches every other part once, in an order that matters: the new
configuration, its transition, the plan record and the driver's actions (restart, bin moves,
a coordination interval) are saved together before the snapshot is published, so an agent
that dies in between resumes the plan (`Hub` moves an Accepted plan on to Applying at start).
It is a part of its own because it is the one place that writes the configuration and the
ledger together; the ledger itself only follows plans once they exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from swivel.api.errors import FieldProblem, SpecError, problems_from
from swivel.api.phases import PlanPhase
from swivel.api.reconfiguration import ReconfigurationSpec, validate_against_job
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.planning import plan_reconfiguration
from swivel.jobs.agent import plans
from swivel.jobs.agent.driver_actions import COORDINATION_ACTION, driver_action
from swivel.jobs.agent.parts import HubParts
from swivel.jobs.agent.plans import PlanRecord, Timings
from swivel.jobs.control.recording import record_update
from swivel.protocol.answers import Errors
from swivel.protocol.bodies import SubmissionBody
from swivel.protocol.documents import BodyRejected
from swivel.protocol.snapshots import Component, OperatorConfig, Transition, scheduler_named


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


def parse_submission(
    body: Any, job: StreamJobSpec, job_name: str, *, migrations: bool = False
) -> Submission:
    """Validate the body (400) and check it against the job (422)."""
    if not isinstance(body, dict):
        raise PlanRejected(400, [FieldProblem("body", "expected a JSON object {name, spec}")])
    problems: list[FieldProblem] = []
    fields = body_fields(body)  # the envelope as a strict model (SubmissionBody)
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


class PlanIntake:
    def __init__(
        self,
        job: StreamJobSpec,
        job_name: str,
        parts: HubParts,
        *,
        migrations: bool,
        schedule_dir: Path | None,
    ) -> None:
        """`parts`: what an acceptance writes to (parts.py)."""
        self._job, self._job_name, self._state, self._save = job, job_name, parts.state, parts.save
        self._ledger, self._config, self._actions = parts.ledger, parts.config, parts.actions
        self._loads, self._batches = parts.loads, parts.batches
        self._metrics, self._clock = parts.metrics, parts.clock
        self._migrations, self._schedule_dir = migrations, schedule_dir

    def accept(self, body: Any) -> tuple[PlanRecord, bool]:
        """A new plan (True: durable, then published) or the one an earlier submission with
        the same `idempotencyKey` created (False: nothing is planned or published again);
        PlanRejected (400/409/422) when it cannot be accepted."""
        try:
            submission = parse_submission(
                body, self._job, self._job_name, migrations=self._migrations
            )
            earlier = self._ledger.with_key(submission.idempotency_key)
            if earlier is not None:
                return earlier, False
            self._refuse_while_busy()
            planned = plan_reconfiguration(
                self._job,
                submission.spec,
                current_assignment=self._placement(submission),
                scheduler_override=submission.scheduler,
            )
            if planned.refused:  # what Spark cannot carry out consistently
                refused = [FieldProblem(r.field, r.reason) for r in planned.refused]
                raise PlanRejected(422, refused)
        except PlanRejected:
            self._metrics.plans.labels("rejected").inc()
            raise
        plan = planned.to_dict()
        state, now = self._state, self._clock()
        plan_id = f"{_slug(submission.name)}-{state.config_version + 1}"
        new_operators = updated_operators(state.operators, submission.spec)
        transition = build_transition(
            plan_id=plan_id,
            scheduler=submission.scheduler,
            plan=plan,
            current=state.operators,
            spec=submission.spec,
            from_config_version=state.config_version,
            apply_from_batch=self._batches.first_untouched(),
        )
        record = PlanRecord(
            id=plan_id,
            name=submission.name,
            scheduler=submission.scheduler,
            spec=submission.spec.to_manifest(),
            plan=plan,
            from_config_version=state.config_version,
            to_config_version=state.config_version + 1,
            targets={op: new_operators[op].version for op in submission.spec.targets},
            timings=Timings(requested_at=submission.requested_at or now, accepted_at=now),
            idempotency_key=submission.idempotency_key,
        )
        self._record_schedule_updates(record, state.operators)
        state.config_version += 1
        state.operators = new_operators
        state.history[state.config_version] = new_operators
        state.accepted_at[state.config_version] = now
        state.transition, state.active_plan = transition, plan_id
        self._ledger.put(record)
        self._queue_driver_actions(record, submission)
        self._save()  # durable: from here on an agent restart resumes this plan
        record = plans.move(record, PlanPhase.APPLYING)
        self._ledger.put(record)
        self._config.publish()
        self._metrics.plans.labels("accepted").inc()
        self._ledger.settle()  # its first document (and completion, were nothing to wait for)
        return self._ledger.get(plan_id) or record, True

    def _queue_driver_actions(self, record: PlanRecord, submission: Submission) -> None:
        """What the driver must do at a batch boundary for this plan (docs/migration.md)."""
        if submission.scheduler == "restart":
            self._actions.add({"action": "restart", "configVersion": record.to_config_version})
        migration = driver_action(record.id, record.spec, record.plan)  # rescale / moves
        if migration is not None:
            self._actions.add(migration)
            self._loads.forget()  # measured on a placement that is about to change
        if submission.spec.coordination is not None:
            interval = submission.spec.coordination.interval_seconds
            self._actions.add(
                {"action": COORDINATION_ACTION, "planId": record.id, "intervalSeconds": interval}
            )

    def _placement(self, submission: Submission) -> dict[int, str] | None:
        """The placement a migration is planned from: the driver's, as last measured (the
        plan is made here, once; the driver carries it out and refuses it if the placement
        moved on meanwhile). 409 while none is known: the driver reports it after a batch
        (and again after bins moved), so a retry in a moment finds it."""
        if not (submission.spec.rescale or submission.spec.moves):
            return None
        placement = self._loads.placement()
        if placement is None:
            reason = (
                "the driver has not reported its bin placement yet (it does after a batch, "
                "and again after bins moved); a migration is planned from it, retry in a moment"
            )
            raise PlanRejected(409, [FieldProblem("", reason)])
        return placement

    def _refuse_while_busy(self) -> None:
        running = self._ledger.active
        if running is not None:
            reason = f"plan {running.id} is {running.phase.value}; one plan at a time"
            raise PlanRejected(409, [FieldProblem("", reason)], running_plan=running.id)
        transition = self._state.transition
        if transition is not None:
            reason = (
                f"plan {transition.id} completed; its transition ends with the current "
                "micro-batch, retry in a moment"
            )
            raise PlanRejected(409, [FieldProblem("", reason)], running_plan=transition.id)

    def _record_schedule_updates(self, record: PlanRecord, before: Mapping[str, Any]) -> None:
        if self._schedule_dir is None:
            return
        for operator, version in record.targets.items():
            record_update(
                self._schedule_dir, operator, before[operator].version, version,
                txn=record.to_config_version,
            )  # fmt: skip


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:50] or "plan"
