"""The agent's `delayMs` is the in-effect moment: with a driver reporting batches, a Fries
plan whose tag-follower (`combine`) may still run old-tagged rows completes only when the
batch that holds them has completed; `armedMs` is reported beside it. Real agent (aiohttp),
real control clients, the driver channel over HTTP."""

from __future__ import annotations

import time
from typing import Any

import pytest

from swivel.jobs.control import client as control
from tests.polling import wait_for


def test_a_tag_follower_is_in_effect_when_the_batch_with_old_tags_completed(
    agent: Any, clients: Any, call: Any, swap_model: Any
) -> None:
    progress = agent.url + "/v1/driver/progress"
    call(progress, "POST", {"batchId": 6, "event": "completed", "at": time.time()})
    call(progress, "POST", {"batchId": 7, "event": "started", "at": time.time()})
    with control.working_on("customer-detector"):  # the head is mid-batch 7
        head = clients(3001, "customer-detector")
        tail = clients(3002, "merchant-detector", "combine")
        wait_for(
            lambda: {3001, 3002} <= {w.pid for w in agent.call(agent.hub.live_workers)},
            5.0,
            every=0.005,
        )
        requested = time.time()
        status, plan, _ = call(
            agent.url + "/v1/plans", "POST", {**swap_model(), "requestedAt": requested}
        )
        assert status == 202
        plan_url = f"{agent.url}/v1/plans/{plan['id']}"
        assert head.wait_for_revision(2, 5) and tail.wait_for_revision(2, 5)
        switched_at = time.time()
        head.ack("customer-detector", 2, 2, partition=0, batch_id=7, at=switched_at)
    tail.ack("combine", 2, 2, partition=1, batch_id=7, at=switched_at + 0.05)
    wait_for(lambda: call(plan_url)[1]["progress"]["workersSwitched"] == 2, 5.0, every=0.005)
    time.sleep(0.2)  # every worker switched and every target ran new records, but ...
    waiting = call(plan_url)[1]
    assert waiting["phase"] == "Applying" and waiting["delayMs"] is None
    # ... batch 7 still holds rows the head tagged before its switch, which combine runs
    # under the old rule until the batch completes.
    ended = switched_at + 0.4
    call(progress, "POST", {"batchId": 7, "event": "completed", "at": ended})
    wait_for(lambda: call(plan_url)[1]["phase"] == "Completed", 5.0, every=0.005)
    done = call(plan_url)[1]
    assert done["delayMs"] == pytest.approx((ended - requested) * 1000, abs=1.0)
    assert done["armedMs"] == pytest.approx((switched_at - requested) * 1000, abs=1.0)
    assert done["armedMs"] < done["propagationMs"] < done["delayMs"]
    assert done["timings"]["inEffectAt"] is not None


def test_a_head_armed_between_batches_leaves_nothing_old_behind(
    agent: Any, clients: Any, call: Any, swap_model: Any
) -> None:
    """Batch 7 completed and 8 not reported: the idle head is armed on receipt, no batch
    holds old-tagged rows, so the plan is in effect once combine ran new records."""
    progress = agent.url + "/v1/driver/progress"
    call(progress, "POST", {"batchId": 7, "event": "completed", "at": time.time()})
    head = clients(3101, "customer-detector")
    tail = clients(3102, "merchant-detector", "combine")
    wait_for(
        lambda: {3101, 3102} <= {w.pid for w in agent.call(agent.hub.live_workers)},
        5.0,
        every=0.005,
    )
    status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
    assert status == 202
    plan_url = f"{agent.url}/v1/plans/{plan['id']}"
    wait_for(
        lambda: call(plan_url)[1]["progress"]["workersSwitched"] == 2, 5.0, every=0.005
    )  # both armed
    tail.ack("combine", 2, 2, partition=1, batch_id=8)
    head.ack("customer-detector", 2, 2, partition=0, batch_id=8)
    wait_for(lambda: call(plan_url)[1]["phase"] == "Completed", 5.0, every=0.005)
    done = call(plan_url)[1]
    assert done["delayMs"] == pytest.approx(done["propagationMs"], abs=1.0)
