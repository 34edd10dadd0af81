"""One running fraud job, the same reconfiguration applied again and again: the demo and
the benchmark.

A trial waits for the surge to make micro-batches long, requests the swap (expensive ->
cheap model, combiner any -> both) at a random point inside a running batch, waits until
the agent reports every target worker switched, lets the cheap model run for a while, then
swaps back under fries so the next trial starts from the expensive model again. Function
versions only grow, so every plan is its own update transaction in the recorded schedule,
checked per trial (`verdicts.check_plan`) and for the whole run.

The surge: the query starts at a low rate (the first micro-batch pays for JVM and Python
worker start-up) and is then restarted once, at a batch boundary, at the surge rate - a
rate above what the expensive model sustains, so each batch holds what arrived during the
previous one and batches grow until the swap drains the backlog.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from swivel.embedded.running import EmbeddedJob
from swivel.embedded.sizing import EXPENSIVE_OPERATOR, Sizing, swap_back, swap_model
from swivel.embedded.verdicts import check_plan

SCHEDULERS = ("fries", "epoch", "restart", "naive")
WARM_UP_RATE = 5


@dataclass(frozen=True)
class Trial:
    scheduler: str
    plan: dict[str, Any]
    delay_ms: float | None
    requested_at: float
    completed_at: float
    batch_ms_before: float  # the last completed batch when the request was sent
    violations: int
    records: int

    @property
    def first_switch_ms(self) -> float | None:
        """Acceptance -> the first worker's switch (for fries: a head's next check)."""
        timings = self.plan.get("timings") or {}
        accepted, first = _epoch(timings.get("acceptedAt")), _epoch(timings.get("firstSwitchAt"))
        return (first - accepted) * 1000.0 if accepted is not None and first is not None else None

    @property
    def propagation_ms(self) -> float | None:
        """Acceptance -> the new versions had processed records at every target (for a
        Fries non-head behind a shuffle: when the upstream stage of the batch ended)."""
        value = self.plan.get("propagationMs")
        return float(value) if value is not None else None

    def summary(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "plan": self.plan.get("id"),
            "phase": self.plan.get("phase"),
            "delay_ms": self.delay_ms,
            "first_switch_ms": self.first_switch_ms,
            "propagation_ms": self.propagation_ms,
            "batch_ms_before": self.batch_ms_before,
            "violations": self.violations,
            "records": self.records,
        }


class AgentCalls:
    """Plain synchronous calls to the agent (the trial loop runs beside the query)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def submit(self, body: dict[str, Any], retry_s: float = 600.0) -> dict[str, Any]:
        """POST /v1/plans, retrying while the previous plan's transition is retired (409)."""
        deadline = time.monotonic() + retry_s
        while True:
            status, answer = self.call("POST", "/v1/plans", body)
            if status == 202:
                return dict(answer)
            if status != 409 or time.monotonic() > deadline:
                raise RuntimeError(f"the agent refused the plan ({status}): {answer}")
            time.sleep(0.1)

    def wait(self, plan_id: str, timeout_s: float = 300.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            _, plan = self.call("GET", f"/v1/plans/{plan_id}")
            if plan.get("phase") in ("Completed", "Failed"):
                return dict(plan)
            if time.monotonic() > deadline:
                raise TimeoutError(f"plan {plan_id} still {plan.get('phase')}")
            time.sleep(0.02)


class TrialRunner:
    def __init__(self, embedded: EmbeddedJob, sizing: Sizing, surge_batch_s: float) -> None:
        assert embedded.agent is not None and embedded.schedule_dir is not None
        self.embedded, self.sizing, self.surge_batch_s = embedded, sizing, surge_batch_s
        self.agent = AgentCalls(embedded.agent.url, embedded.agent.token)
        self.runtime = embedded.runtime
        self.events: list[tuple[str, float, float]] = []  # (scheduler, requested, completed)
        self.surge_started_at: float | None = None

    def start_surge(self, warm_up_batches: int = 2, timeout_s: float = 300.0) -> None:
        """After the warm-up batches, restart the query at the surge rate."""
        self.runtime.wait_for_batches(warm_up_batches, timeout_s)
        job = self.runtime.job
        source = job.source.model_copy(update={"rows_per_second": self.sizing.rows_per_second})
        self.runtime.job = job.model_copy(update={"source": source})
        self.runtime.restart()
        self.surge_started_at = time.time()

    def _last_batch_ms(self) -> float:
        progress = self.runtime.progress
        return float(progress[-1]["durationMs"] or 0) if progress else 0.0

    def wait_for_long_batches(self, timeout_s: float | None = None) -> float:
        """Until a batch took `surge_batch_s`; then a random point inside the next one.

        On a machine fast enough that batches never get that long, go after ~15 of them."""
        if timeout_s is None:
            timeout_s = max(30.0, 15 * self.surge_batch_s)
        deadline = time.monotonic() + timeout_s
        seen = len(self.runtime.progress)
        while True:
            progress = self.runtime.progress
            if len(progress) > seen and self._last_batch_ms() >= self.surge_batch_s * 1000:
                break
            if time.monotonic() > deadline:
                break  # the machine is fast today: go with the batches it has
            time.sleep(0.02)
        last_ms = self._last_batch_ms()
        time.sleep(random.uniform(0.1, 0.7) * last_ms / 1000.0)
        return last_ms

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
        before_ms = self.wait_for_long_batches()
        spec = swap_model().spec.to_manifest()
        body: dict[str, Any] = {"name": f"swap-model-{scheduler}", "spec": spec}
        if scheduler == "naive":
            body["schedulerOverride"] = "naive"
        else:
            spec["scheduler"] = scheduler
        requested = time.time()
        body["requestedAt"] = requested
        plan = self.agent.wait(self.agent.submit(body)["id"])
        completed = time.time()
        self.events.append((scheduler, requested, completed))
        time.sleep(after_s)  # the cheap model at work: the "after" latency
        self._wait_for_drain()
        back = self.agent.submit({"name": "swap-back", "spec": swap_back(self.sizing)})
        self.agent.wait(back["id"])
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
        return Trial(
            scheduler=scheduler,
            plan=plan,
            delay_ms=plan.get("delayMs"),
            requested_at=requested,
            completed_at=completed,
            batch_ms_before=before_ms,
            violations=len(verdict.violations),
            records=verdict.records,
        )


def _epoch(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


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
