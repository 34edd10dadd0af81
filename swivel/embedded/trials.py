"""One running fraud job, the same reconfiguration applied again and again: the demo and
the benchmark.

A trial waits for the surge to make micro-batches long, requests the swap (expensive ->
cheap model, combiner any -> both) at a random point inside a running batch, waits until
the agent reports the plan completed, lets the cheap model run for a while, then swaps back
under fries so the next trial starts from the expensive model again. Function versions only
grow, so every plan is its own update transaction in the recorded schedule, checked per
trial (`verdicts.check_plan`) and for the whole run; its *in-effect* delay is read off the
same schedule (`effect.measure`).

Schedulers: fries, epoch, naive (`schedulerOverride`), `restart` - the cold restart the
Spark operators do, a new driver process from the checkpoint (`cold.ColdRestart`) - and
`restart-warm`, the same-driver query restart.

The surge: the query starts at the surge rate on the cheap model (which keeps up while the
first micro-batches pay for JVM and Python worker start-up), then switches to the expensive
model: a rate above what it sustains, so each batch holds what arrived during the previous
one and batches grow until the swap drains the backlog (topped up by a pause where the
machine keeps up: `wait_for_long_batches`).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from swivel.api.streamjob import StreamJob
from swivel.embedded.agents import BlockingAgent
from swivel.embedded.cold import ColdRestart
from swivel.embedded.effect import Effect, measure
from swivel.embedded.running import EmbeddedJob
from swivel.embedded.sizing import (
    EXPENSIVE_OPERATOR,
    Sizing,
    example_job,
    for_trials,
    swap_back,
    swap_model,
)
from swivel.embedded.verdicts import check_plan
from swivel.jobs.agent.client import AgentRejected

SCHEDULERS = ("fries", "epoch", "restart", "restart-warm", "naive")
COLD, WARM = "restart", "restart-warm"
TOP_UP_AFTER = 4  # batches without a surge-length one before the surge is topped up


@dataclass(frozen=True)
class Trial:
    scheduler: str
    plan: dict[str, Any]
    effect: Effect  # read off the recorded schedule
    requested_at: float
    completed_at: float
    batch_ms_before: float  # the last completed batch when the request was sent
    violations: int
    records: int

    @property
    def delay_ms(self) -> float | None:
        """The request -> in effect, from the schedule (docs/benchmarks.md)."""
        return self.effect.delay_ms

    def _plan_ms(self, key: str) -> float | None:
        value = self.plan.get(key)
        return float(value) if value is not None else None

    @property
    def agent_delay_ms(self) -> float | None:
        """The agent's in-effect delay (its `delayMs`, from acks and batch ends)."""
        return self._plan_ms("delayMs")

    @property
    def armed_ms(self) -> float | None:
        """The request -> the last target or head worker holds the new version (agent)."""
        return self._plan_ms("armedMs")

    @property
    def first_switch_ms(self) -> float | None:
        """The request -> the first worker's switch (for fries: a head's next check)."""
        first = epoch_seconds((self.plan.get("timings") or {}).get("firstSwitchAt"))
        return (first - self.requested_at) * 1000.0 if first is not None else None

    @property
    def propagation_ms(self) -> float | None:
        """The request -> the new versions had processed records at every target."""
        return self._plan_ms("propagationMs")

    def summary(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "plan": self.plan.get("id"),
            "phase": self.plan.get("phase"),
            "delay_ms": _round(self.delay_ms),
            "armed_ms": _round(self.armed_ms),
            "agent_delay_ms": _round(self.agent_delay_ms),
            "first_switch_ms": _round(self.first_switch_ms),
            "propagation_ms": _round(self.propagation_ms),
            "batch_ms_before": self.batch_ms_before,
            "violations": self.violations,
            "records": self.records,
            **self.effect.summary(),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def apply(
    agent: BlockingAgent,
    name: str,
    spec: Mapping[str, Any],
    *,
    requested_at: float | None = None,
    scheduler_override: Literal["naive"] | None = None,
    retry_s: float = 600.0,
) -> dict[str, Any]:
    """Submit a plan and follow it to its end: the plan document once Completed or Failed.
    A 409 (the previous plan's transition is still being retired) is retried."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            plan = agent.submit(
                name, spec, requested_at=requested_at, scheduler_override=scheduler_override
            )
            break
        except AgentRejected as error:
            if error.status != 409 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)
    return agent.wait_for_completion(str(plan["id"]))


class TrialRunner:
    def __init__(self, embedded: EmbeddedJob, sizing: Sizing, surge_batch_s: float) -> None:
        assert embedded.agent is not None and embedded.schedule_dir is not None
        self.embedded, self.sizing, self.surge_batch_s = embedded, sizing, surge_batch_s
        self.agent = BlockingAgent(embedded.agent.url, embedded.agent.token)
        self.runtime = embedded.runtime
        self.events: list[tuple[str, float, float]] = []  # (scheduler, requested, completed)
        self.surge_started_at: float | None = None
        self.top_ups = 0  # pauses that rebuilt the surge (`wait_for_long_batches`)

    def start_surge(self, warm_up_batches: int = 2, timeout_s: float = 300.0) -> None:
        """After the warm-up batches (the cheap model keeps up with the surge rate while
        Spark starts its Python workers), switch to the expensive model: the surge begins
        from short batches, as it does again after every trial's swap back."""
        self.runtime.wait_for_batches(warm_up_batches, timeout_s)
        # The first batch holds every row that arrived while Spark started: let the cheap
        # model work it off (a batch of at most ~2 s, or batches that stopped shrinking on
        # a loaded machine) before the expensive one runs.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._caught_up():
            time.sleep(0.05)
        self.surge_started_at = time.time()
        apply(self.agent, "surge", swap_back(self.sizing))

    def _caught_up(self) -> bool:
        progress = self.runtime.progress
        if float(progress[-1].get("durationMs") or 0) <= 2000.0:
            return True
        rows = [int(p.get("numInputRows") or 0) for p in progress[-2:]]
        return len(progress) >= 4 and rows[-1] <= 1.1 * rows[0]

    def _last_batch_ms(self) -> float:
        progress = self.runtime.progress
        return float(progress[-1]["durationMs"] or 0) if progress else 0.0

    def wait_for_long_batches(self, timeout_s: float | None = None) -> float:
        """Until a batch took `surge_batch_s`; then a random point inside the next one.

        Every scheduler must swap inside a batch of the same length, or their delays are not
        comparable. Batches grow from short ones after each switch to the expensive model;
        on a machine that keeps up with the surge rate they stop growing below
        `surge_batch_s`, so after `TOP_UP_AFTER` batches short of it the surge is topped up: the query
        stops at a boundary for about one surge batch and resumes from its checkpoint, and
        the rate source delivers the rows of the pause in the next batch (what a burst of
        traffic does). With `surge_batch_s` 0 (the smoke test) the next batch is taken."""
        if timeout_s is None:
            timeout_s = max(30.0, 15 * self.surge_batch_s)
        deadline = time.monotonic() + timeout_s
        seen = started = len(self.runtime.progress)
        topped_up = False
        while True:
            progress = self.runtime.progress
            if len(progress) > seen and self._last_batch_ms() >= self.surge_batch_s * 1000:
                break
            if len(progress) - started >= TOP_UP_AFTER and not topped_up:
                self._top_up()
                topped_up, seen = True, len(self.runtime.progress)
                deadline = time.monotonic() + timeout_s
            if time.monotonic() > deadline:
                break  # the machine is fast today: go with the batches it has
            time.sleep(0.02)
        last_ms = self._last_batch_ms()
        time.sleep(random.uniform(0.1, 0.7) * last_ms / 1000.0)
        return last_ms

    def _top_up(self) -> None:
        """Pause the query for one surge batch's worth of rows at the expensive model's pace
        (measured on the last batches), then resume it from the checkpoint."""
        recent = [p for p in self.runtime.progress[-TOP_UP_AFTER:] if p.get("durationMs")]
        rows = sum(int(p.get("numInputRows") or 0) for p in recent)
        seconds = sum(float(p["durationMs"]) for p in recent) / 1000.0
        pace = rows / seconds if rows and seconds else float(self.sizing.rows_per_second)
        pause_s = 1.2 * self.surge_batch_s * pace / self.sizing.rows_per_second
        self.runtime.stop_at_boundary()
        time.sleep(min(max(pause_s, 0.0), 4 * self.surge_batch_s))
        self.runtime.start()
        self.top_ups += 1

    def _wait_for_drain(self, timeout_s: float = 60.0) -> None:
        """Until the cheap model has worked the backlog off (a short batch, or a few batches
        on a slow machine), so that every trial's surge grows from similar batches."""
        deadline = time.monotonic() + timeout_s
        seen = len(self.runtime.progress)
        short_ms = max(self.surge_batch_s * 1000 / 2, 2.0 * self.sizing.trigger_ms)
        while time.monotonic() < deadline:
            done = len(self.runtime.progress) - seen
            if done >= self.sizing.drain_batches or (done and self._last_batch_ms() <= short_ms):
                return
            time.sleep(0.05)

    def trial(self, scheduler: str, after_s: float) -> Trial:
        spec = swap_model().spec.to_manifest()
        override: Literal["naive"] | None = None
        if scheduler == "naive":
            override = "naive"
        else:
            spec["scheduler"] = "restart" if scheduler in (COLD, WARM) else scheduler
        cold = None
        if scheduler == COLD:
            manifest = self.embedded.job.model_copy(update={"spec": self.runtime.job})
            cold = ColdRestart(self.runtime, manifest.to_manifest(), self.embedded.workdir)
        with cold or contextlib.nullcontext():
            before_ms = self.wait_for_long_batches()
            requested = time.time()
            name = f"swap-model-{scheduler}"
            plan = apply(
                self.agent, name, spec, requested_at=requested, scheduler_override=override
            )
            completed = time.time()
            if cold is not None:
                cold.release()  # measured: back to this driver
                cold.wait_resumed()  # its first batch holds the hand-over's rows
        self.events.append((scheduler, requested, completed))
        time.sleep(after_s)  # the cheap model at work: the "after" latency
        self._wait_for_drain()
        apply(self.agent, "swap-back", swap_back(self.sizing))
        return self._result(scheduler, plan, requested, completed, before_ms)

    def _result(
        self,
        scheduler: str,
        plan: dict[str, Any],
        requested: float,
        completed: float,
        before_ms: float,
    ) -> Trial:
        targets = plan.get("progress", {}).get("operators", {})
        versions = {op: (int(s["version"]) - 1, int(s["version"])) for op, s in targets.items()}
        assert self.embedded.schedule_dir is not None
        verdict = check_plan(self.embedded.schedule_dir, int(plan["configVersion"]), versions)
        effect = measure(self.embedded.schedule_dir, versions, requested, until=completed + 1.0)
        return Trial(
            scheduler=scheduler,
            plan=plan,
            effect=effect,
            requested_at=requested,
            completed_at=completed,
            batch_ms_before=before_ms,
            violations=len(verdict.violations),
            records=verdict.records,
        )


def epoch_seconds(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def surge_job(sizing: Sizing) -> StreamJob:
    """The job the demo and the benchmark start: the example at the surge rate on the cheap
    model (`TrialRunner.start_surge` switches to the expensive one), one slot per bin."""
    return for_trials(example_job(sizing, model="cheap"), sizing)


def latency_rows(embedded: EmbeddedJob) -> Any:
    """Per output row: when it left the last operator and its end-to-end latency (s)."""
    frame = embedded.output_rows(
        (
            "CAST(_swivel_ts AS DOUBLE) AS source_at",
            "_swivel_emitted_at AS emitted_at",
            "customer_model",
        )
    )
    return frame.assign(latency_s=frame["emitted_at"] - frame["source_at"])


def default_sizing_note(sizing: Sizing) -> str:
    return (
        f"{sizing.rows_per_second} payments/s, {sizing.customers} customers, "
        f"{sizing.bins} bins, expensive model work={sizing.work} ({EXPENSIVE_OPERATOR})"
    )
