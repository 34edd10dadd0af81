"""The hub's rules with time injected: replays pinned, late workers, timeouts, durability."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent.acks import AcksRejected
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.intake import PlanRejected
from swivel.jobs.agent.store import StateStore

PARSE = "swivel.jobs.examples.fraud:parse"
JOB = load_streamjob(
    Path(__file__).resolve().parents[3] / "examples/fraud-detection/streamjob.yaml"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(scheduler: str = "fries") -> dict[str, Any]:
    return {
        "name": "swap",
        "spec": {
            "jobRef": {"name": "fraud-detection"},
            "scheduler": scheduler,
            "functionUpdates": [{"operator": "customer-detector", "params": {"model": "cheap"}}],
        },
    }


def hub(tmp_path: Path, clock: Clock, **options: Any) -> Hub:
    return Hub(JOB.spec, JOB.name, store=StateStore(tmp_path), clock=clock, **options)


def test_a_replayed_batch_is_pinned_to_the_version_it_first_ran_under(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent.record_progress({"batchId": 5, "event": "started", "at": clock.now - 0.1})
    clock.now += 1
    agent.submit(body())
    agent.record_progress({"batchId": 6, "event": "started", "at": clock.now - 5})  # sent late
    assert agent.snapshot.pinned_batches == {}
    # The driver restarted: batch 5 runs again and must see configuration 1 throughout.
    restarted = hub(tmp_path, clock)
    restarted.record_progress({"batchId": 5, "event": "started", "at": clock.now})
    restarted.record_progress({"batchId": 6, "event": "started", "at": clock.now})
    snapshot = restarted.snapshot
    assert snapshot.pinned_batches == {5: 1, 6: 1}
    assert snapshot.pinned_configs[1]["customer-detector"].version == 1
    restarted.record_progress({"batchId": 5, "event": "completed"})
    assert restarted.snapshot.pinned_batches == {6: 1}


def test_a_silent_worker_ages_out_and_the_plan_completes(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, worker_ttl_s=30)
    agent._register(1, ["customer-detector"])
    agent._register(2, ["customer-detector"])
    record = agent.submit(body())
    agent.record_acks([{"pid": 1, "operator": "customer-detector", "version": 2, "at": clock.now}])
    assert agent.plan(record.id).phase.value == "Applying"
    clock.now += 31
    agent._register(1, [])
    agent.tick()
    done = agent.plan(record.id)
    assert done.phase.value == "Completed" and done.delay_ms == 0.0


def test_a_worker_that_starts_hosting_a_target_after_acceptance_has_nothing_to_switch(
    tmp_path: Path,
) -> None:
    """PySpark forks Python workers as it needs them: one born after the plan was accepted
    never ran the old version, so the delay must not wait for its first batch."""
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(1, ["customer-detector"])
    record = agent.submit(body())
    clock.now += 0.01
    agent._register(2, ["customer-detector"])  # forked after acceptance, not busy yet
    clock.now += 0.02
    agent.record_acks([{"pid": 1, "operator": "customer-detector", "version": 2, "at": clock.now}])
    done = agent.plan(record.id)
    assert done.phase.value == "Completed"  # not waiting for worker 2's first batch
    assert done.delay_ms == pytest.approx(30.0)


def test_a_plan_that_never_completes_fails_visibly(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, plan_timeout_s=60)
    record = agent.submit(body())
    clock.now += 61
    agent.tick()
    failed = agent.plan(record.id)
    assert failed.phase.value == "Failed" and "customer-detector" in failed.message
    assert agent.active_plan is None


def test_a_timeout_after_every_worker_switched_names_the_targets_without_records(
    tmp_path: Path,
) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, plan_timeout_s=60)
    agent._register(1, ["customer-detector"])
    record = agent.submit(body())
    agent.record_acks([ack(1, 2, at=clock.now, kind="armed")])  # switched, nothing ran
    clock.now += 61
    agent._register(1, [])
    agent.tick()
    message = agent.plan(record.id).message
    assert "[]" not in message
    assert "no records processed under the new version ['customer-detector']" in message
    assert "not switched" not in message


def test_a_timeout_names_the_workers_that_have_not_switched(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, plan_timeout_s=60)
    agent._register(7, ["customer-detector"])
    record = agent.submit(body())
    clock.now += 61
    agent._register(7, [])
    agent.tick()
    assert "not switched (customer-detector at pid 7)" in agent.plan(record.id).message


def test_rejections_leave_the_configuration_alone(tmp_path: Path) -> None:
    agent = hub(tmp_path, Clock())
    bad = body()
    bad["spec"]["functionUpdates"][0]["operator"] = "ghost"
    with pytest.raises(PlanRejected) as raised:
        agent.submit(bad)
    assert raised.value.status == 422
    rescale = body()
    rescale["spec"]["rescale"] = {"executors": 3}
    with pytest.raises(PlanRejected) as raised:
        agent.submit(rescale)
    assert raised.value.status == 422
    assert agent.snapshot.config_version == 1 and agent.snapshot.revision == 1


def test_schedule_updates_are_recorded_on_acceptance(tmp_path: Path) -> None:
    agent = hub(tmp_path / "state", Clock(), schedule_dir=tmp_path / "schedule")
    agent.submit(body())
    lines = (tmp_path / "schedule" / "updates.jsonl").read_text().splitlines()
    assert lines == [
        '{"event": "update", "operator": "customer-detector", "from": 1, "to": 2, "txn": 2}'
    ]


def test_epoch_without_started_reports_skips_the_batch_that_may_be_running(tmp_path: Path) -> None:
    agent = hub(tmp_path, Clock())
    agent.record_progress({"batchId": 9, "event": "completed"})
    agent.submit(body("epoch"))
    transition = agent.snapshot.transition
    assert transition is not None and transition.apply_from_batch == 11


HEADED_BY_A_NON_TARGET = StreamJobSpec.model_validate(
    {
        "source": {"kind": "generator"},
        "dataflow": {
            "bins": 4,
            "operators": [
                {"name": "src", "kind": "source"},
                {"name": "fm", "kind": "flatMap", "inputs": ["src"], "function": PARSE},
                {"name": "a", "inputs": ["fm"], "function": PARSE},
                {"name": "b", "inputs": ["a"], "function": PARSE},
                {"name": "out", "kind": "sink", "inputs": ["b"]},
            ],
        },
    }
)


def test_the_delay_waits_for_a_head_that_is_no_target(tmp_path: Path) -> None:
    """Updating a and b makes fm (one-to-many) the component's head: until fm's worker
    stamps new tags, records still reach a and b under the old versions."""
    clock = Clock()
    agent = Hub(HEADED_BY_A_NON_TARGET, "j", store=StateStore(tmp_path), clock=clock)
    agent._register(1, ["fm"])
    agent._register(2, ["a", "b"])
    spec = {"jobRef": {"name": "j"}, "scheduler": "fries",
            "functionUpdates": [{"operator": "a", "params": {"x": "1"}},
                                {"operator": "b", "params": {"x": "1"}}]}  # fmt: skip
    record = agent.submit({"name": "swap", "spec": spec})
    assert record.heads == {"fm"} and "fm" not in record.targets
    clock.now += 0.01
    agent.record_acks([{"pid": 2, "operator": op, "version": 2, "configVersion": 2,
                        "at": clock.now, "kind": "processed"} for op in ("a", "b")])  # fmt: skip
    assert agent.plan(record.id).phase.value == "Applying"  # fm has not switched
    clock.now += 0.05
    agent.record_acks([{"pid": 1, "operator": "fm", "version": 1, "configVersion": 2,
                        "at": clock.now, "kind": "armed"}])  # fmt: skip
    done = agent.plan(record.id)
    assert done.phase.value == "Completed"
    assert done.delay_ms == pytest.approx(60.0)


def ack(pid: int, version: int, at: float, kind: str = "processed") -> dict[str, Any]:
    return {"pid": pid, "operator": "customer-detector", "version": version,
            "configVersion": version, "at": at, "kind": kind}  # fmt: skip


def test_a_worker_known_first_by_a_late_ack_of_an_earlier_check_must_switch(
    tmp_path: Path,
) -> None:
    """Worker 2's first check (old version) ran before acceptance but its ack arrived after:
    it was hosting the target all along, so the plan waits for its switch."""
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(1, ["customer-detector"])
    agent._register(2, [])  # its first watch named no operator yet; acks need a watch first
    record = agent.submit(body())
    clock.now += 0.05
    agent.record_acks([ack(2, 1, at=clock.now - 0.06)])  # checked 10 ms before acceptance
    agent.record_acks([ack(1, 2, at=clock.now)])
    assert agent.plan(record.id).phase.value == "Applying"  # worker 2 still runs version 1
    clock.now += 0.05
    agent.record_acks([ack(2, 2, at=clock.now)])
    done = agent.plan(record.id)
    assert done.phase.value == "Completed" and done.delay_ms == pytest.approx(100.0)


def test_an_ack_of_an_earlier_check_moves_hosting_back_after_a_watch_told_it_late(
    tmp_path: Path,
) -> None:
    """The client names a newly hosted operator on its next watch, which comes only after
    the publication ended the long-poll: its ack tells when it really started."""
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(1, [])
    record = agent.submit(body())
    clock.now += 0.01
    agent._register(1, ["customer-detector"])  # the watch after the publication
    agent.record_acks([ack(1, 1, at=clock.now - 0.02)])  # its check before acceptance
    agent._register(9, [])
    agent.record_acks([ack(9, 2, at=clock.now)])  # the target processed somewhere else
    assert agent.plan(record.id).phase.value == "Applying"  # worker 1 must switch


def test_after_an_agent_restart_the_resumed_plan_waits_for_workers_that_reconnect(
    tmp_path: Path,
) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(1, ["customer-detector"])
    record = agent.submit(body())
    clock.now += 0.01
    agent._register(2, [])
    agent.record_acks([ack(2, 2, at=clock.now)])  # processed at worker 2; worker 1 has not
    assert agent.plan(record.id).phase.value == "Applying"
    clock.now += 5  # the agent restarts; the workers reconnect within seconds
    restarted = hub(tmp_path, clock)
    clock.now += 1
    restarted._register(1, ["customer-detector"])
    restarted.tick()
    assert restarted.plan(record.id).phase.value == "Applying"  # worker 1 still on v1
    restarted.record_acks([ack(1, 2, at=clock.now)])
    assert restarted.plan(record.id).phase.value == "Completed"


def test_after_the_grace_a_worker_that_appears_has_nothing_to_switch(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, worker_ttl_s=30)
    record = agent.submit(body())
    clock.now += 1
    restarted = hub(tmp_path, clock, worker_ttl_s=30)
    clock.now += 31  # forked long after the restart: it never ran version 1
    restarted._register(3, ["customer-detector"])
    restarted._register(4, [])
    restarted.record_acks([ack(4, 2, at=clock.now)])
    assert restarted.plan(record.id).phase.value == "Completed"


def test_a_body_with_one_bad_ack_applies_none_of_it(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(1, ["customer-detector"])
    record = agent.submit(body())
    with pytest.raises(AcksRejected) as refused:
        agent.record_acks([ack(2, 2, at=clock.now), {**ack(1, 2, at=clock.now), "kind": "done"}])
    assert [p.field for p in refused.value.problems] == ["[1].kind"]
    assert 2 not in agent.workers  # the good ack before it was not applied either
    assert agent.plan(record.id).switched == frozenset()


def test_a_worker_not_seen_for_the_forget_time_is_forgotten(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, worker_ttl_s=10, forget_after_s=40)
    agent._register(1, ["combine"])
    agent._register(2, ["combine"])
    clock.now += 30
    agent._register(2, [])  # seen again
    clock.now += 15
    agent.tick()
    assert set(agent.workers) == {2}  # 1 last seen 45 s ago; 2 only 15 s ago


def test_the_worker_registry_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from swivel.jobs.agent import workers as workers_module
    from swivel.protocol.documents import BodyRejected

    monkeypatch.setattr(workers_module, "MAX_WORKERS", 3)
    clock = Clock()
    agent = hub(tmp_path, clock, worker_ttl_s=10, forget_after_s=40)
    for pid in (1, 2, 3):
        agent._register(pid, [])
    with pytest.raises(BodyRejected) as refused:
        agent._register(4, [])
    assert refused.value.status == 429 and refused.value.problems[0].field == "pid"
    clock.now += 41  # the old ones are forgotten: room again
    agent._register(4, [])
    assert set(agent.workers) == {4}


def test_a_corrupt_state_file_starts_the_job_from_its_spec(tmp_path: Path) -> None:
    clock = Clock()
    (tmp_path / "agent-state.json").write_text('{"format": 1, "configVersion": 7')
    agent = hub(tmp_path, clock)
    assert agent.snapshot.config_version == 1
    assert agent.state_recovered_from is not None
    assert agent.state_recovered_from.name.startswith("agent-state.json.corrupt-")
    assert "swivel_agent_state_recovered_total 1.0" in agent.metrics.exposition().decode()
    agent.submit(body())  # and works on
    assert hub(tmp_path, clock).snapshot.config_version == 2


def test_reading_a_plan_changes_nothing_only_a_tick_times_it_out(tmp_path: Path) -> None:
    """GETs never change state: past its timeout a plan stays Applying, its document the
    same, until time comes in through `tick` (the app's periodic task)."""
    clock = Clock()
    agent = hub(tmp_path, clock, plan_timeout_s=60)
    record = agent.submit(body())
    first = agent.plan_document(record)
    clock.now += 61
    assert agent.plan_document(agent.plan(record.id)) == first
    assert agent.plan(record.id).phase.value == "Applying"
    agent.tick()
    failed = agent.plan_document(agent.plan(record.id))
    assert failed["phase"] == "Failed" and failed["revision"] != first["revision"]


def test_a_restarted_agent_hands_out_revisions_its_predecessor_did_not(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    record = agent.submit(body())
    before = agent.plan_document(record)["revision"]
    clock.now += 1
    restarted = hub(tmp_path, clock)
    assert restarted.plan_document(restarted.plan(record.id))["revision"] > before
