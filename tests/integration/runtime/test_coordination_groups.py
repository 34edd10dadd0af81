"""Swivel's per-batch coordination grouped every g batches (swivel.jobs.runtime.grouping) on
local Spark, with the real agent: the `completed` reports and the migration driver's
boundary hook come every g batches, the `started` report every batch; a Fries
reconfiguration submitted meanwhile still completes, with a coordination point at every
batch while it is in flight, and grouping resumes after it."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.embedded.running import EmbeddedJob
from swivel.jobs.agent.auth import Role, role_token
from swivel.jobs.migration.driver import MigrationDriver
from swivel.jobs.runtime.grouping import CoordinationGroups
from swivel.jobs.runtime.testing import bounded
from tests.integration.runtime.conftest import EXAMPLE, http, labelling_job
from tests.polling import wait_for

pytestmark = pytest.mark.spark

G = 2
SWAP = {
    "jobRef": {"name": "fraud-detection"},  # the example's name, kept by the test's job
    "scheduler": "fries",
    "functionUpdates": [{"operator": "label", "params": {"label": "v2"}}],
}


class Reports:
    """The progress events the driver posted to the agent, in order (wraps `report`)."""

    def __init__(self, channel: Any) -> None:
        self.events: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        post = channel.report

        def report(event: Any) -> None:
            post(event)
            with self._lock:
                self.events.append((str(event["event"]), int(event["batchId"])))

        channel.report = report

    def batches(self, kind: str) -> list[int]:
        with self._lock:
            return [b for k, b in self.events if k == kind]


@pytest.mark.timeout(600)  # ~40 s on an idle machine; 234 s seen at load 24
def test_grouped_coordination_every_g_batches_and_a_reconfiguration_completes(
    spark: Any, tmp_path: Path
) -> None:
    example = load_streamjob(EXAMPLE)
    job = example.model_copy(update={"spec": bounded(labelling_job(), rows_per_batch=20)})
    groups = CoordinationGroups(fixed=G)
    embedded = EmbeddedJob(job, tmp_path / "work", spark, groups=groups)
    hooked: list[int] = []
    driver = None
    try:
        embedded.start()
        runtime, agent = embedded.runtime, embedded.agent
        assert agent is not None
        reports = Reports(runtime.agent)
        driver = MigrationDriver(
            spark, job.spec.dataflow.bins, lambda: runtime.query, None, groups=groups
        )
        boundary = driver.mover.boundary

        def hook(batch: int) -> None:
            hooked.append(batch)
            boundary(batch)

        driver.mover.boundary = hook  # type: ignore[method-assign]
        driver.start()
        first = runtime.batches_completed()
        runtime.wait_for_batches(first + 4 * G + 1, timeout=300)

        # Nothing pending: `completed` at the points only, G batches apart; `started` always.
        quiet = [b for b in reports.batches("completed") if b > first]
        assert len(quiet) >= 3, reports.events
        assert all(later - earlier == G for earlier, later in itertools.pairwise(quiet))
        started = [b for b in reports.batches("started") if b > first + 1]
        assert started == list(range(started[0], started[0] + len(started))), started
        assert hooked and set(hooked) <= set(groups.points), (hooked, list(groups.points))

        # A reconfiguration: submitted, in flight (every batch a point), completed.
        url, token = agent.url, role_token(agent.token, Role.OPERATOR)
        submitted = time.time()
        status, plan = http(url + "/v1/plans", "POST", {"name": "rule", "spec": SWAP}, token)
        assert status == 202, plan
        plan_url = f"{url}/v1/plans/{plan['id']}"

        def finished() -> dict[str, Any] | None:
            body = http(plan_url, "GET", None, token)[1]
            return body if body["phase"] in ("Completed", "Failed") else None

        final = wait_for(finished, 60, "the plan finished")
        assert final["phase"] == "Completed", final
        wait_for(lambda: not runtime.plan_in_flight(), 30, "the transition retired", every=0.02)
        retired = time.time()
        # The driver's feed learns of the plan and of its retirement within milliseconds.
        in_flight = [
            int(e["batchId"]) for e in runtime.progress if submitted + 0.3 < e["at"] < retired - 0.3
        ]
        assert set(in_flight) <= set(groups.points), (in_flight, list(groups.points))
        assert set(in_flight) <= set(reports.batches("completed")), reports.events

        # Retired and settled: grouping resumes.
        wait_for(lambda: not runtime.plan_in_flight(), 30, "the transition retired")
        settled = runtime.batches_completed()
        runtime.wait_for_batches(settled + 3 * G + 1, timeout=180)
        after = [b for b in reports.batches("completed") if b > settled + 1]
        assert any(later - earlier == G for earlier, later in itertools.pairwise(after)), (
            reports.events
        )
    finally:
        if driver is not None:
            driver.stop()
        embedded.stop()
