"""The prewarm helper's check reaches the StreamJob's status: `MigrationDriver` posts the
mover's check once per check to a real agent (`POST /v1/driver/prewarm-check`), the agent
keeps the latest and serves it in `/v1/config`, and the operator's real agent link reads it
into `AgentHealth` for the `PrewarmReady` condition. A body that is not a check is refused
naming the field, and only the driver's credential may post one. Spark is replaced by the
fake mover (the real check runs in tests/integration/cluster/test_prewarm.py)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.migration.driver import MigrationDriver
from swivel.operator.agents import ClientAgentLink, JobAddress
from tests.fakes_migration import FakeMover, FakeQuery
from tests.polling import wait_for

from .conftest import DRIVER_TOKEN, TOKEN, WORKER_TOKEN

ROUTE = "/v1/driver/prewarm-check"


def _driver(agent: Any, mover: FakeMover) -> MigrationDriver:
    query = FakeQuery()
    return MigrationDriver(
        spark=None,
        bins=16,
        query=lambda: query,
        agent=AgentDriverChannel(agent.url, DRIVER_TOKEN),
        mover=mover,  # type: ignore[arg-type]
    )


def _served(agent: Any, call: Any) -> Any:
    status, body, _ = call(agent.url + "/v1/config")
    assert status == 200
    return body["prewarmCheck"]


def test_the_driver_posts_each_check_once_and_the_agent_serves_the_latest(
    agent: Any, call: Any
) -> None:
    mover = FakeMover()
    driver = _driver(agent, mover)
    posted: list[dict[str, Any]] = []
    channel = driver.agent
    assert channel is not None
    original = channel.report_prewarm_check

    def counted(body: Any) -> None:
        posted.append(dict(body))
        original(body)

    channel.report_prewarm_check = counted  # type: ignore[method-assign]
    threading.Thread(target=driver._measure_loop, daemon=True).start()
    try:
        assert _served(agent, call) is None  # none yet: the query has no batch with state
        mover.helper_check = {"0": "answered", "1": "no helper endpoint registered"}
        served = wait_for(lambda: _served(agent, call), 5.0, every=0.02)
        assert served["executors"] == mover.helper_check
        assert served["checkedAt"] > 0
        driver._batch_done.set()  # more turns of the loop: the same check is not sent again
        wait_for(lambda: len(posted) == 1 and not driver._batch_done.is_set(), 5.0, every=0.02)
        assert len(posted) == 1
        mover.helper_check = {"0": "answered", "1": "answered"}  # the query restarted
        wait_for(lambda: _served(agent, call)["executors"]["1"] == "answered", 5.0, every=0.02)
        assert len(posted) == 2
    finally:
        driver.stop()


def test_a_check_the_agent_refused_is_sent_again(agent: Any) -> None:
    """An agent that did not take the check (unreachable, refusing) gets it at a later turn
    of the loop: `_check_sent` moves only once the agent took it."""
    mover = FakeMover(helper_check={"0": "answered"})
    driver = _driver(agent, mover)
    channel = driver.agent
    assert channel is not None
    original = channel.report_prewarm_check
    failing = {"on": True}  # failure switch

    def flaky(body: Any) -> None:
        if failing["on"]:
            raise ConnectionRefusedError("agent restarting")
        original(body)

    channel.report_prewarm_check = flaky  # type: ignore[method-assign]
    driver._report_helper_check()
    assert driver._check_sent is None
    failing["on"] = False
    driver._report_helper_check()
    assert driver._check_sent is mover.helper_check


def test_a_body_that_is_not_a_check_is_refused_naming_the_field(agent: Any, call: Any) -> None:
    url = agent.url + ROUTE
    for body, field in (
        ({}, "executors"),
        ({"executors": {"0": 7}}, "executors.0"),
        ({"executors": {"": "answered"}}, "executors"),
        ({"executors": {"0": "x" * 5000}}, "executors.0"),
        ({"executors": {"0": "answered"}, "checkedAt": -1}, "checkedAt"),
        ({"executors": {str(i): "answered" for i in range(4097)}}, "executors"),
        ({"executors": {"0": "answered"}, "extra": 1}, "extra"),
    ):
        status, answer, _ = call(url, "POST", body)
        assert status == 400, body
        fields = [p["field"] for p in answer["errors"]]
        assert any(f.startswith(field) for f in fields), (body, fields)
    assert _served(agent, call) is None  # nothing kept from a refused body
    assert call(url, "POST", {"executors": {"0": "answered"}})[0] == 202
    assert _served(agent, call)["executors"] == {"0": "answered"}


def test_only_the_driver_may_post_a_check(agent: Any, call: Any) -> None:
    body = {"executors": {"0": "answered"}}
    for token in (TOKEN, WORKER_TOKEN, None):
        assert call(agent.url + ROUTE, "POST", body, token)[0] in (401, 403)
    assert _served(agent, call) is None


def test_the_operator_link_reads_the_check_into_agent_health(agent: Any, call: Any) -> None:
    body = {"executors": {"0": "answered", "1": "no helper endpoint registered"}}
    assert call(agent.url + ROUTE, "POST", body)[0] == 202
    link = ClientAgentLink(lambda namespace, job: agent.url, retries=0)

    async def health() -> Any:
        try:
            return await link.health(JobAddress("streams", "fraud-detection", TOKEN))
        finally:
            await link.close()

    health_seen = asyncio.run(health())
    assert health_seen.prewarm_check is not None
    assert health_seen.prewarm_check.unanswered == {"1": "no helper endpoint registered"}


def test_a_reason_longer_than_the_wire_takes_is_cut_not_fatal(agent: Any, call: Any) -> None:
    """A reason is a Java failure's text, which can run long: the driver cuts it to the
    document's 4 096 characters instead of failing to build it (which would end the loop
    that also measures the loads)."""
    mover = FakeMover(helper_check={"0": "java.lang.IllegalStateException: " + "x" * 9000})
    driver = _driver(agent, mover)
    driver._report_helper_check()
    assert driver._check_sent is mover.helper_check
    served = _served(agent, call)["executors"]["0"]
    assert len(served) == 4096 and served.startswith("java.lang.IllegalStateException")
