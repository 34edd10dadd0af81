"""100 jobs x 10 Reconfigurations on the sandbox, every one terminal exactly once (issue 11 §5).

What runs is `benchmarks/operator_reaction.py`'s environment (no Spark): the sandbox API
server and the real operator as subprocesses (production intervals), one real aiohttp agent
per job (`create_app(Hub(...))` with its durable state, reached through the Service name)
and a stand-in driver and worker per job that acknowledge each new function version and
complete the batch, so plans complete as they would on a live job. The test creates the
StreamJobs, waits until all are Ready, then creates every Reconfiguration at once (round by
round, job after job: 10 per job in a few seconds). The operator queues them per job (one at
a time, oldest first; the agent refuses a second plan while one is active), so this is the
queueing path under load, not a benchmark of reaction times.

Checked, each check fails the test:

- **terminal exactly once**: every Reconfiguration ends Completed, or Failed with a reason
  (a message), within the bound; on the watch stream (followed from before the first create,
  resumed by resourceVersion when the server ends it) its phases only moved forward and it
  reached a terminal phase once;
- **applied exactly once, in order**: each Completed one records a plan id the job's agent
  holds under its name; the agent holds exactly one plan per Completed Reconfiguration of the
  job and none for a Failed one, in creation order (plan N of a job moves configuration
  version N to N+1), each Completed;
- **nothing lost**: the agent's configuration version is 1 + the job's Completed count.

Wall time, phase counts and the load average are printed (`-s`) and kept in
docs/reliability.md. The 100 x 10 run is marked `slow` (`make test-slow`); a 10 x 3 run with
the same checks stays in `make test`.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from swivel.api.phases import FINAL_PHASES
from tests.integration.operator.test_reaction_bench import load_benchmark
from tests.polling import PollTimeoutError, wait_for

GROUP, VERSION = "swivel.dev", "v1alpha1"
ORDER = {"Pending": 0, "Queued": 0, "Planned": 1, "Applying": 2, "Completed": 3, "Failed": 3}


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages (CI and other work share this machine)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Recorder:
    """Every phase each Reconfiguration of a namespace shows on the watch stream, in order;
    the stream is resumed from the last resourceVersion seen whenever the server ends it."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.phases: dict[str, list[str]] = collections.defaultdict(list)
        self.restarts = 0
        self._custom = client.CustomObjectsApi(api)
        self._namespace = namespace
        self._stopping = threading.Event()
        self._watch: watch.Watch | None = None
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        version: str | None = None
        while not self._stopping.is_set():
            self._watch = watch.Watch()
            kwargs: dict[str, Any] = {"timeout_seconds": 120}
            if version is not None:
                kwargs["resource_version"] = version
            try:
                for event in self._watch.stream(
                    self._custom.list_namespaced_custom_object,
                    GROUP, VERSION, self._namespace, "reconfigurations",
                    **kwargs,
                ):  # fmt: skip
                    obj = event["object"]
                    if event["type"] == "ERROR":  # e.g. 410 Gone: the test cannot trust it
                        raise AssertionError(f"watch error: {obj}")
                    version = obj["metadata"].get("resourceVersion") or version
                    if event["type"] == "BOOKMARK":
                        continue
                    phase = (obj.get("status") or {}).get("phase")
                    seen = self.phases[obj["metadata"]["name"]]
                    if phase and (not seen or seen[-1] != phase):
                        seen.append(phase)
            except Exception as error:  # the stream breaks when the test stops it
                if not self._stopping.is_set():
                    self.failure = error
                return
            self.restarts += 1

    def stop(self) -> None:
        self._stopping.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(10)


def _items(custom: Any, namespace: str) -> list[dict[str, Any]]:
    found = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "reconfigurations")
    items: list[dict[str, Any]] = found["items"]
    return items


def _agent_plans(bench: Any, namespace: str, job: str) -> tuple[list[Any], int]:
    """The plans the job's agent holds (by configuration version) and its current version."""

    async def look() -> tuple[list[Any], int]:
        state = bench.fleet.agents[(namespace, job)].hub._state
        held = sorted(state.plans.values(), key=lambda p: p.from_config_version)
        return held, int(state.config_version)

    found: tuple[list[Any], int] = bench.fleet.call(look())
    return found


def run_many(workdir: Path, jobs_n: int, per_job: int, bound_s: float) -> dict[str, Any]:
    bm = load_benchmark()
    with bm.environment(workdir) as bench:
        namespace = f"many-{jobs_n}x{per_job}-{os.getpid() % 10_000}"
        bench.core.create_namespace({"metadata": {"name": namespace}})
        jobs = [f"job-{i:03d}" for i in range(jobs_n)]
        started = time.monotonic()
        for job in jobs:
            bench.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "streamjobs", bench.job_body(job)
            )
        bench.provision(namespace, jobs, timeout=60 + jobs_n)
        bench.wait_ready(namespace, jobs_n, timeout=60 + jobs_n)
        ready_s = time.monotonic() - started

        watcher_api = client.ApiClient(bench.api.configuration)
        recorder = Recorder(watcher_api, namespace)
        try:
            names: dict[str, list[str]] = {job: [] for job in jobs}
            load_before = loadavg()
            started = time.monotonic()
            for round_ in range(per_job):
                for job in jobs:
                    name = f"{job}-r{round_}"
                    body = bench.reconfiguration_body(name, job, round_)
                    bench.custom.create_namespaced_custom_object(
                        GROUP, VERSION, namespace, "reconfigurations", body
                    )
                    names[job].append(name)
            created_s = time.monotonic() - started
            everyone = [n for job in jobs for n in names[job]]

            def all_terminal() -> dict[str, dict[str, Any]] | None:
                found = {i["metadata"]["name"]: i for i in _items(bench.custom, namespace)}
                done = all(
                    ((found.get(n) or {}).get("status") or {}).get("phase") in FINAL_PHASES
                    for n in everyone
                )
                return found if done else None

            def left() -> str:
                found = {i["metadata"]["name"]: i for i in _items(bench.custom, namespace)}
                phases = collections.Counter(
                    ((found.get(n) or {}).get("status") or {}).get("phase") for n in everyone
                )
                return f"all {len(everyone)} terminal within {bound_s:.0f} s (now {phases})"

            try:
                final = wait_for(all_terminal, bound_s, "every job terminal", every=1.0)
            except PollTimeoutError:
                raise AssertionError(left()) from None
            wall_s = time.monotonic() - started
            load_after = loadavg()
            # The watch delivers the last writes shortly after the list shows them.
            wait_for(
                lambda: all(recorder.phases[n][-1:] and recorder.phases[n][-1] in FINAL_PHASES
                            for n in everyone),
                30, "the watch saw every terminal phase",
            )  # fmt: skip
        finally:
            recorder.stop()
            watcher_api.close()
        assert recorder.failure is None, recorder.failure

        # Terminal exactly once, phases only forward, Failed only with a reason.
        counts: collections.Counter[str] = collections.Counter()
        for name in everyone:
            seen = recorder.phases[name]
            assert sum(p in FINAL_PHASES for p in seen) == 1, (name, seen)
            assert [ORDER[p] for p in seen] == sorted(ORDER[p] for p in seen), (name, seen)
            status = final[name]["status"]
            assert seen[-1] == status["phase"], (name, seen, status)
            counts[status["phase"]] += 1
            if status["phase"] == "Failed":
                assert status.get("message"), (name, status)

        # Applied exactly once, in creation order; nothing lost.
        for job in jobs:
            completed = [n for n in names[job] if final[n]["status"]["phase"] == "Completed"]
            held, version = _agent_plans(bench, namespace, job)
            assert [p.name for p in held] == completed, (job, [p.name for p in held])
            for number, plan in enumerate(held, start=1):
                assert plan.from_config_version == number, (job, plan.name)
                assert plan.phase.value == "Completed", (job, plan.name, plan.phase)
                assert final[plan.name]["status"]["agentPlanId"] == plan.id, (job, plan.name)
            assert version == 1 + len(completed), (job, version)

        figures = {
            "jobs": jobs_n,
            "reconfigurations per job": per_job,
            "phases": dict(counts),
            "showed Queued": sum("Queued" in recorder.phases[n] for n in everyone),
            "jobs Ready s": round(ready_s, 1),
            "creates s": round(created_s, 1),
            "all terminal s": round(wall_s, 1),
            "watch restarts": recorder.restarts,
            "loadavg before / after": f"{load_before} / {load_after}",
        }
        print(f"many jobs figures: {figures}")
        return figures


@pytest.mark.timeout(90)
def test_10_jobs_x_3_reconfigurations_all_terminal_exactly_once(tmp_path: Path) -> None:
    figures = run_many(tmp_path, jobs_n=10, per_job=3, bound_s=60)
    assert sum(figures["phases"].values()) == 30


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_100_jobs_x_10_reconfigurations_all_terminal_exactly_once(tmp_path: Path) -> None:
    figures = run_many(tmp_path, jobs_n=100, per_job=10, bound_s=1200)
    assert sum(figures["phases"].values()) == 1000
