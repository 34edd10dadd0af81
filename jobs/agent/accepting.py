"""Accepting a plan: from a `POST /v1/plans` body to a durable, published configuration.

An acceptance touches every other part once, in an order that matters: the submission is
validated and planned (submissions.py), refused while another plan runs, then the new
configuration, its transition, the plan record and the driver's actions (restart, bin moves,
a coordination interval) are saved together before the snapshot is published, so an agent
that dies in between resumes the plan (`Hub` moves an Accepted plan on to Applying at start).
It is a part of its own because it is the one place that writes the configuration and the
ledger together; the ledger itself only follows plans once they exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from swivel.api.errors import FieldProblem
from swivel.api.phases import PlanPhase
from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent import plans
from swivel.jobs.agent.batches import Batches
from swivel.jobs.agent.configuration import ConfigChannel
from swivel.jobs.agent.driver_actions import COORDINATION_ACTION, DriverActions, driver_action
from swivel.jobs.agent.latest_loads import LatestLoads
from swivel.jobs.agent.ledger import PlanLedger
from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.plans import PlanRecord, Timings
from swivel.jobs.agent.store import DurableState
from swivel.jobs.agent.submissions import (
    Planner,
    PlanRejected,
    Submission,
    build_transition,
    parse_submission,
    runtime_refusals,
    updated_operators,
)
from swivel.jobs.control.recording import record_update


class PlanIntake:
    def __init__(  # noqa: PLR0917 - an acceptance writes to each of these
        self,
        job: StreamJobSpec,
        job_name: str,
        state: DurableState,
        save: Callable[[], None],
        ledger: PlanLedger,
        config: ConfigChannel,
        actions: DriverActions,
        loads: LatestLoads,
        batches: Batches,
        metrics: AgentMetrics,
        clock: Callable[[], float],
        *,
        planner: Planner,
        migrations: bool,
        schedule_dir: Path | None,
    ) -> None:
        self._job, self._job_name, self._state, self._save = job, job_name, state, save
        self._ledger, self._config, self._actions = ledger, config, actions
        self._loads, self._batches, self._metrics, self._clock = loads, batches, metrics, clock
        self._planner, self._migrations, self._schedule_dir = planner, migrations, schedule_dir

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
            plan = self._planner(self._job, submission.spec, self._placement(submission))
            refused = runtime_refusals(plan, self._job, submission)
            if refused:
                raise PlanRejected(422, refused)
        except PlanRejected:
            self._metrics.plans.labels("rejected").inc()
            raise
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
