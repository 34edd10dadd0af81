"""The driver's query stopped abruptly mid-batch during a Fries reconfiguration (issue 11 §5).

The job runs as `swivel run` runs it (`EmbeddedJob`: the agent as a subprocess with its
durable state, the query in this process, the schedule recorded). A Fries plan that swaps
customer-detector's model and combine's rule is submitted to the agent; once a worker has
processed rows of the running batch under the new version (the switch was published and
taken mid-batch), the query is stopped at once (`query.stop()`: Spark cancels the batch's
tasks; the batch is in the offset log, not in the commit log) and started again from the
checkpoint, as a restarted driver would. Spark replays the batch with the same id; the
driver reports it `started` again, and the agent pins the replay to the configuration
version recorded when the batch first started (docs/control-protocol.md, `pinnedBatches`).

Checked, each check fails the test:

- the first attempt of the batch did run rows under the new version (the kill came after
  the switch, so the test is not vacuous) and was not committed;
- the replay ran entirely under one configuration: every row of the replayed batch, on both
  targets, at the version in force when the batch first started (the old one);
- the recorded schedule of what committed (the aborted attempt's events dropped: its output
  was discarded with it) is serializable by the checker (`check_recorded`), with the plan's
  update transaction in it, and the plan completes after the restart.

This is a query stopped inside a live driver, not a driver process killed: `swivel run`
holds the query in its own process with the agent as a child that dies with it, so a
SIGKILL would take the agent too. The agent's durable state survives either way. The
driver process SIGKILLed (its JVM and Python workers with it) beside a separate agent is
`tests/integration/embedded/test_driver_sigkill.py`; this test stays for what only a live
driver allows: the stopped attempt's workers outliving the stop, and the pin switched off.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.embedded.running import EmbeddedJob
from swivel.jobs.agent.auth import Role, role_token
from swivel.jobs.control.recording import complete_lines, process_events
from swivel.jobs.runtime.testing import bounded, check_recorded
from tests.integration.runtime.conftest import EXAMPLE, http, small_fraud_job
from tests.polling import wait_for

pytestmark = pytest.mark.spark

TARGETS = ("customer-detector", "combine")
SWAP = {
    "jobRef": {"name": "fraud-detection"},
    "scheduler": "fries",
    "functionUpdates": [
        {
            "operator": "customer-detector",
            "function": "swivel.jobs.examples.fraud:customer_model",
            "params": {"model": "cheap", "threshold": 0.8},
        },
        {"operator": "combine", "params": {"rule": "both"}},
    ],
}


def events(schedule: Path) -> list[dict[str, Any]]:
    return process_events(schedule)


def wait(check: Any, timeout: float, what: str) -> Any:
    return wait_for(check, timeout, what, every=0.01)


def quiet(schedule: Path, for_s: float = 1.5, timeout: float = 30.0) -> None:
    """Wait until no worker has written a process event for `for_s` seconds."""
    seen = {"count": -1, "since": time.monotonic()}

    def settled() -> bool:
        count = len(events(schedule))
        if count != seen["count"]:
            seen.update(count=count, since=time.monotonic())
        return time.monotonic() - seen["since"] >= for_s

    wait_for(settled, timeout, "the stopped batch's workers to stop writing", every=0.1)


def timeline(recorded: list[dict[str, Any]], batch: int) -> list[str]:
    """When each operator's version changed in `batch` (for a failure message)."""
    changes, last = [], None
    for e in sorted((e for e in recorded if e["batch"] == batch), key=lambda e: e["at"]):
        if (e["operator"], e["version"]) != last:
            last = (e["operator"], e["version"])
            changes.append(f"{e['at']:.3f} {e['operator']}@{e['version']}")
    return changes


def committed_schedule(schedule: Path, out: Path, batch: int, restart: float) -> Path:
    """A copy of `schedule` without the aborted attempt's process events (batch `batch`
    before the restart): what the sink holds, which is what the checker must find serializable."""
    out.mkdir()
    for path in schedule.iterdir():
        if not path.name.startswith("process-"):
            if path.is_file():
                shutil.copy(path, out / path.name)
            continue
        kept = [
            line
            for line in complete_lines(path).splitlines()
            if not ((e := json.loads(line))["batch"] == batch and e["at"] < restart)
        ]
        (out / path.name).write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    return out


@pytest.mark.timeout(180)
def test_a_batch_stopped_after_the_switch_replays_under_its_durable_configuration(
    spark: Any, tmp_path: Path
) -> None:
    started = time.monotonic()
    example = load_streamjob(EXAMPLE)
    # 100 rows a batch of the expensive model: batches of a few seconds, so the stop (some
    # 20 ms after the first new-version row) lands inside the batch the switch was taken in.
    spec = bounded(small_fraud_job(work=1000), rows_per_batch=100)
    job = example.model_copy(update={"spec": spec})
    embedded = EmbeddedJob(job, tmp_path / "work", spark, record_schedule=True).start()
    schedule = tmp_path / "work" / "schedule"
    checkpoint = tmp_path / "work" / "checkpoint"
    try:
        runtime = embedded.runtime
        runtime.wait_for_batches(1, timeout=90)
        assert embedded.agent is not None
        url, token = embedded.agent.url, role_token(embedded.agent.token, Role.OPERATOR)
        before = {
            op: {e["version"] for e in events(schedule) if e["operator"] == op} for op in TARGETS
        }
        assert all(len(v) == 1 for v in before.values()), before
        old = {op: next(iter(v)) for op, v in before.items()}

        # The batch that is running now: its tasks have processed rows.
        running = runtime.batches_completed()
        wait(
            lambda: any(
                e["operator"] == "customer-detector" and (e["batch"] or 0) >= running
                for e in events(schedule)
            ),
            60,
            f"customer-detector runs batch {running}",
        )
        status, plan = http(url + "/v1/plans", "POST", {"name": "swap-model", "spec": SWAP}, token)
        assert status == 202, plan

        # The switch is taken mid-batch: a row of some batch ran under the new version.
        def switched() -> int | None:
            for e in events(schedule):
                if e["operator"] == "customer-detector" and e["version"] != old[e["operator"]]:
                    return int(e["batch"])
            return None

        batch = wait(switched, 30, "customer-detector ran rows under the new version")
        query = runtime.query
        killed_at = time.time()
        query.stop()  # abrupt: the batch's tasks are cancelled wherever they are
        assert not (checkpoint / "commits" / str(batch)).exists(), (
            f"batch {batch} committed before the stop: no replay to check (the batch was "
            "too short on this machine)"
        )
        assert (checkpoint / "offsets" / str(batch)).exists()

        # A killed driver takes its tasks with it; here the cancelled tasks' Python workers
        # may still finish an Arrow batch. Wait until they are quiet, so every event before
        # the restart belongs to the aborted attempt and every later one to the replay.
        quiet(schedule)
        restarted_at = time.time()
        runtime.start()  # from the checkpoint: batch `batch` is replayed
        done = runtime.batches_completed()
        runtime.wait_for_batches(done + 1, timeout=90)  # the replay; then the plan ends
        plan_id = plan["id"]
        wait(
            lambda: (
                http(f"{url}/v1/plans/{plan_id}", "GET", None, token)[1]["phase"]
                in ("Completed", "Failed")
            ),
            60,
            "the plan finished",
        )
        final = http(f"{url}/v1/plans/{plan_id}", "GET", None, token)[1]
    finally:
        embedded.stop()

    recorded = events(schedule)
    first = [e for e in recorded if e["batch"] == batch and e["at"] < restarted_at]
    replay = [e for e in recorded if e["batch"] == batch and e["at"] >= restarted_at]
    assert any(e["version"] != old[e["operator"]] for e in first if e["operator"] in TARGETS)
    replayed = {op: {e["version"] for e in replay if e["operator"] == op} for op in TARGETS}
    assert replayed == {op: {old[op]} for op in TARGETS}, (
        f"batch {batch} replayed under {replayed}, not entirely under {old}; "
        f"stopped at {killed_at:.3f}, restarted at {restarted_at:.3f}; {timeline(recorded, batch)}"
    )
    assert {e["record"] for e in replay} >= {e["record"] for e in first}

    whole = check_recorded(schedule)
    verdict = check_recorded(
        committed_schedule(schedule, tmp_path / "committed", batch, restarted_at)
    )
    assert verdict.serializable, [v.describe() for v in verdict.violations[:5]]
    assert len(verdict.transactions) == 1
    assert final["phase"] == "Completed", final
    after = {
        op: {e["version"] for e in recorded if e["operator"] == op and e["batch"] > batch}
        for op in TARGETS
    }
    print(
        f"driver-stop figures: batch {batch} stopped after "
        f"{sum(e['version'] != old[e['operator']] for e in first if e['operator'] in TARGETS)}"
        f" new-version rows of {len(first)} events; replay {len(replay)} events at {replayed}; "
        f"later batches {after}; committed schedule: {verdict.records} records, "
        f"{len(verdict.violations)} violations; whole schedule with the aborted attempt: "
        f"{len(whole.violations)} violations; plan {final['phase']}; "
        f"{time.monotonic() - started:.0f} s"
    )
