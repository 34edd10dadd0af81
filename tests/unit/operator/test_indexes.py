"""`Known`: kopf's indexes corrected by the operator's own writes; `Submissions`: submits
first. Pure asyncio, no kopf runtime (the indexes are plain mappings here)."""

from __future__ import annotations

import asyncio
from typing import Any

from swivel.operator.contexts import Submissions
from swivel.operator.indexes import JOBS, RECONFIGURATIONS, Known


def _recon(name: str, version: int, phase: str | None = None, job: str = "j") -> dict[str, Any]:
    return {
        "apiVersion": "swivel.dev/v1alpha1",
        "kind": "Reconfiguration",
        "metadata": {"namespace": "ns", "name": name, "resourceVersion": str(version)},
        "spec": {"jobRef": {"name": job}},
        "status": {"phase": phase} if phase else {},
    }


def _known(*recons: dict[str, Any], jobs: dict[Any, Any] | None = None) -> Known:
    unfinished: dict[Any, list[dict[str, Any]]] = {}
    for recon in recons:
        unfinished.setdefault(("ns", recon["spec"]["jobRef"]["name"]), []).append(recon)
    known = Known()
    known.attach({JOBS: jobs or {}, RECONFIGURATIONS: unfinished})
    return known


def test_nothing_is_known_until_kopf_hands_over_its_indexes() -> None:
    known = Known()
    assert known.reconfigurations_of("ns", "j") is None
    assert known.reconfiguration("ns", "a", "j") is None
    assert known.job("ns", "j") is None
    known.attach({"some_other_index": {}})
    assert not known.attached


def test_an_own_write_newer_than_the_index_wins_until_the_watch_catches_up() -> None:
    indexed = _recon("a", 10)
    known = _known(indexed)
    known.wrote(_recon("a", 12, "Applying"))
    assert known.reconfiguration("ns", "a", "j") == _recon("a", 12, "Applying")
    indexed["metadata"]["resourceVersion"] = "12"  # the watch event arrived
    indexed["status"] = {"phase": "Applying"}
    assert known.reconfiguration("ns", "a", "j") is indexed
    assert not known._written  # dropped once caught up


def test_an_own_final_write_takes_the_object_out_of_the_queue_at_once() -> None:
    known = _known(_recon("a", 10, "Applying"), _recon("b", 11, "Queued"))
    known.wrote(_recon("a", 13, "Completed"))
    assert [o["metadata"]["name"] for o in known.reconfigurations_of("ns", "j") or []] == ["b"]


def test_a_write_older_than_the_index_or_without_a_number_loses() -> None:
    known = _known(_recon("a", 20, "Applying"))
    known.wrote(_recon("a", 15, "Queued"))
    assert (known.reconfiguration("ns", "a", "j") or {})["status"]["phase"] == "Applying"
    known.wrote({**_recon("a", 0, "Completed"), "metadata": {"namespace": "ns", "name": "a"}})
    assert (known.reconfiguration("ns", "a", "j") or {})["status"]["phase"] == "Applying"


def test_writes_of_objects_the_index_let_go_are_forgotten() -> None:
    known = _known(_recon("b", 11))
    known.wrote(_recon("a", 12, "Completed"))  # finished: no longer indexed
    assert [o["metadata"]["name"] for o in known.reconfigurations_of("ns", "j") or []] == ["b"]
    assert not known._written


def test_the_job_is_the_newer_of_the_watch_and_the_last_status_write() -> None:
    job = {"apiVersion": "swivel.dev/v1alpha1", "kind": "StreamJob",
           "metadata": {"namespace": "ns", "name": "j", "resourceVersion": "5"}}  # fmt: skip
    known = _known(jobs={("ns", "j"): [job]})
    assert known.job("ns", "j") is job
    rescaled = {**job, "metadata": {**job["metadata"], "resourceVersion": "7"},
                "status": {"executors": 3}}  # fmt: skip
    known.wrote(rescaled)
    assert (known.job("ns", "j") or {})["status"]["executors"] == 3
    assert known.job("ns", "other") is None


def test_work_after_acceptance_waits_for_submits_under_way_and_no_longer() -> None:
    async def scenario() -> list[str]:
        submissions, order = Submissions(max_wait_s=5.0), []

        async def submitter() -> None:
            async with submissions.submitting():
                await asyncio.sleep(0.05)
                order.append("submitted")

        async def recorder() -> None:
            await asyncio.sleep(0.01)
            await submissions.settled()
            order.append("recorded")

        await asyncio.gather(submitter(), recorder())
        await asyncio.wait_for(submissions.settled(), 0.1)  # nothing under way: at once
        return order

    assert asyncio.run(scenario()) == ["submitted", "recorded"]


def test_steady_submits_cannot_starve_the_work_after_acceptance() -> None:
    async def scenario() -> float:
        submissions = Submissions(max_wait_s=0.05)
        loop = asyncio.get_running_loop()
        async with submissions.submitting():
            started = loop.time()
            await submissions.settled()
            return loop.time() - started

    assert 0.04 <= asyncio.run(scenario()) < 1.0
