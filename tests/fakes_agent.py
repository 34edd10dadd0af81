"""The tests' in-memory agent: an `AgentLink` with failure switches, and a plan document
shaped like the real agent's (`jobs/agent/plans.py`), including the plan the real planner
makes (`plan_reconfiguration`, the function the agent calls) for a job it was told about.

A test double, so it lives with the tests (issue 12), not in the operator package.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from swivel.api.phases import FINAL_PHASES
from swivel.api.reconfiguration import ReconfigurationSpec
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.planning import plan_reconfiguration
from swivel.operator.agents import (
    AgentHealth,
    AgentRejected,
    AgentUnreachable,
    JobAddress,
    Loads,
)
from swivel.protocol.bodies import PrewarmCheck


@dataclass
class FakePlan:
    id: str
    name: str
    spec: dict[str, Any]
    polls_left: int
    fails: bool
    document: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    revision: int = 0  # how often its document changed


class TestingAgentLink:
    """An in-memory agent per job, with failure switches a test flips at any time.

    - `unreachable`: every call raises AgentUnreachable (a set of job names, or all with "*").
    - `reject`: the next submissions answer this status (422 or 400) with `reject_errors`.
    - `completion_polls`: a plan completes after this many `get_plan` calls (slow completion).
    - `fail_plans`: plans end Failed instead of Completed.
    - `ready`: what `/readyz` says.
    - `loads_by_job`: the statistics `loads()` returns.
    - `delay_ms`, `workers`, `now`: what a completed plan reports as its delay in effect, how
      many workers switched (of as many), and the clock of its timings; `config_versions`:
      the configuration version a job's agent is at (1 until a test says otherwise; each
      accepted plan adds one). A test that asserts one of these sets it to a value of its
      own first, so the assertion checks what the operator did with it, not the fake.
    One plan at a time per job, like the agent: a second submission answers 409 with
    `runningPlan`; a submission with the key of an earlier one gets that plan back.
    `submissions` records every accepted plan (what a test asserts on).
    `revisions`: documents carry a `revision` (the real agent's long-poll cursor), so a
    follower long-polls; off by default (an agent that answers at once, as before).
    `plan_reads` records every `get_plan` as (plan id, since, timeout, revision answered).
    `job_specs`: a job's StreamJob spec, when a test registers it (`Harness.job` does): an
    accepted plan's document then carries `plan`, made by the agent's own planner.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, *, completion_polls: int = 1) -> None:
        self.unreachable: set[str] = set()
        self.reject: int | None = None
        self.reject_errors: list[dict[str, str]] = []
        self.completion_polls = completion_polls
        self.fail_plans = False
        self.ready = True
        self.loads_by_job: dict[str, Loads] = {}
        self.prewarm_checks: dict[str, PrewarmCheck] = {}  # the driver's, per job
        self.delay_ms = 12.5
        self.workers = 2
        self.now: Callable[[], str] = _now
        self.config_versions: dict[str, int] = {}
        self.job_specs: dict[str, Mapping[str, Any]] = {}
        self.submissions: list[tuple[str, str, dict[str, Any]]] = []
        self.calls: list[tuple[str, str]] = []
        self.revisions = False
        self.plan_reads: list[tuple[str, int | None, float, int | None]] = []
        self._plans: dict[str, FakePlan] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _check(self, job: JobAddress, call: str) -> None:
        self.calls.append((call, job.name))
        if "*" in self.unreachable or job.name in self.unreachable:
            raise AgentUnreachable(f"{job.name}: agent unreachable (testing switch)")

    def plans_of(self, job: str) -> list[FakePlan]:
        return [p for p in self._plans.values() if p.id.startswith(f"{job}/")]

    def _running(self, job: str) -> FakePlan | None:
        return next(
            (p for p in self.plans_of(job) if p.document["phase"] not in FINAL_PHASES),
            None,
        )

    async def submit(
        self, job: JobAddress, name: str, spec: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        self._check(job, "submit")
        with self._lock:
            earlier = next((p for p in self.plans_of(job.name) if key and p.key == key), None)
            if earlier is not None:  # the agent's idempotency key: the same plan back
                return dict(earlier.document)
            if self.reject is not None:
                raise AgentRejected(
                    self.reject, list(self.reject_errors), {"errors": self.reject_errors}
                )
            if spec.get("jobRef", {}).get("name") != job.name:
                errors = [{"field": "spec.jobRef.name", "reason": f"this agent runs {job.name!r}"}]
                raise AgentRejected(422, errors, {"errors": errors})
            running = self._running(job.name)
            if running is not None:
                errors = [{"field": "", "reason": f"plan {running.id} is in flight"}]
                raise AgentRejected(409, errors, {"errors": errors, "runningPlan": running.id})
            plan_id = f"{job.name}/{name}-{next(self._ids)}"
            now = self.now()
            plan = FakePlan(
                plan_id, name, dict(spec), self.completion_polls, self.fail_plans, key=key
            )
            version = self.config_versions.get(job.name, 1) + 1
            self.config_versions[job.name] = version
            plan.document = {
                "id": plan_id,
                "name": name,
                "scheduler": spec.get("scheduler", "fries"),
                "configVersion": version,
                "phase": "Accepted",
                "timings": {"requestedAt": now, "acceptedAt": now},
                "delayMs": None,
                "progress": {"workersSwitched": 0, "workersTotal": self.workers},
                "message": "",
            }
            planned = self._plan(job.name, spec)
            if planned is not None:
                plan.document["plan"] = planned
            self._plans[plan_id] = plan
            self.submissions.append((job.name, name, dict(spec)))
            return dict(plan.document)

    def _plan(self, job: str, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the real agent's planner makes of `spec` for a registered job."""
        body = self.job_specs.get(job)
        if body is None:
            return None
        job_spec = StreamJobSpec.model_validate(body)
        return plan_reconfiguration(job_spec, ReconfigurationSpec.model_validate(spec)).to_dict()

    async def get_plan(
        self, job: JobAddress, plan_id: str, *, since: int | None = None, timeout: float = 0.0
    ) -> dict[str, Any]:
        """Answers at once, whatever `since` and `timeout` say (recorded in `plan_reads`):
        each call moves the plan on, as `polls_left` says."""
        self._check(job, "get_plan")
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None:
                errors = [{"field": "id", "reason": "no such plan"}]
                raise AgentRejected(404, errors, {"errors": errors})
            answer = self._plan_document(plan)
            self.plan_reads.append((plan_id, since, timeout, answer.get("revision")))
            return answer

    def _plan_document(self, plan: FakePlan) -> dict[str, Any]:
        document = plan.document
        if document["phase"] not in FINAL_PHASES:
            plan.revision += 1  # every read of an unfinished plan moves it on
            if self.revisions:
                document["revision"] = plan.revision
        if document["phase"] in FINAL_PHASES:
            return dict(document)
        if plan.polls_left > 0:
            plan.polls_left -= 1
            document.update(
                phase="Applying",
                progress={"workersSwitched": self.workers // 2, "workersTotal": self.workers},
            )
            document["timings"]["firstSwitchAt"] = self.now()
            return dict(document)
        now = self.now()
        document["timings"].update(lastSwitchAt=now, completedAt=now)
        if plan.fails:
            document.update(phase="Failed", message="workers did not switch (testing switch)")
        else:
            document.update(
                phase="Completed",
                delayMs=self.delay_ms,
                progress={"workersSwitched": self.workers, "workersTotal": self.workers},
            )
        return dict(document)

    def finish_all(self) -> None:
        """Let every plan complete on its next poll."""
        with self._lock:
            for plan in self._plans.values():
                plan.polls_left = 0

    async def health(self, job: JobAddress) -> AgentHealth:
        self._check(job, "health")
        running = self._running(job.name)
        return AgentHealth(
            ready=self.ready,
            config_version=self.config_versions.get(job.name, 1),
            operators={},
            active_plan=running.id if running else None,
            workers=self.workers,
            message="" if self.ready else "waiting for the driver's first progress report",
            prewarm_check=self.prewarm_checks.get(job.name),
        )

    async def loads(self, job: JobAddress) -> Loads | None:
        self._check(job, "loads")
        return self.loads_by_job.get(job.name)

    async def close(self) -> None:
        pass


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")
