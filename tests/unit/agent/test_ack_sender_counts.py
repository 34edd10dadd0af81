"""The ack thread carries the worker's counts (Chi §5): on their own at most once a period,
with the next ack when one is queued, and again with the same `seq` after a failed post.
A fake agent connection with failure switches stands in for the network, and each test
counts into its own `WorkCounter`: the process-wide one may be drained by another test's
control client still running in this process."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from swivel.jobs.control import ack_sender, counting
from swivel.jobs.control.ack_sender import AckSender
from swivel.jobs.control.identity import WorkerIdentity
from tests.polling import wait_for


class FakeAgent:
    """Answers the enrol and acks routes; `down` makes a post fail as a refused connection."""

    def __init__(self) -> None:
        self.posts: list[Any] = []
        self.down = False
        self.lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        timeout: float,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes]:
        if path == "/v1/control/workers":
            return 201, json.dumps({"pid": 77, "secret": "s"}).encode()
        if self.down:
            raise ConnectionRefusedError("agent down")
        with self.lock:
            self.posts.append(json.loads(json.dumps(body)))
        return 202, b'{"received": 1}'

    def close(self) -> None:
        return None

    def reports(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for p in self.posts if isinstance(p, dict) for r in p["counts"]]


@pytest.fixture
def counter() -> counting.WorkCounter:
    return counting.WorkCounter()


@pytest.fixture
def sender(
    monkeypatch: pytest.MonkeyPatch, counter: counting.WorkCounter
) -> Iterator[tuple[AckSender, FakeAgent]]:
    monkeypatch.setattr(ack_sender, "REPORT_EVERY_S", 0.05)
    agent, stopped = FakeAgent(), threading.Event()
    sending = AckSender(
        lambda: agent,  # type: ignore[arg-type, return-value]
        WorkerIdentity(77),
        stopped,
        lambda: 1000.0,
        counter=lambda: counter,
    )
    thread = threading.Thread(target=sending.run, daemon=True)
    thread.start()
    yield sending, agent
    stopped.set()
    sending.wake()
    thread.join(2)


def test_counts_go_out_on_their_own_as_a_report(
    sender: tuple[AckSender, FakeAgent], counter: counting.WorkCounter
) -> None:
    _, agent = sender
    counter.add("customer-detector", 2, 10, 0.1)
    wait_for(lambda: len(agent.reports()) == 1, 2.0)
    (post,) = agent.posts
    assert post["acks"] == []
    (report,) = post["counts"]
    assert report["pid"] == 77 and report["partitions"] == [
        {"operator": "customer-detector", "partition": 2, "rows": 10, "busySeconds": 0.1}
    ]


def test_an_ack_carries_the_counts_and_acks_alone_stay_an_array(
    sender: tuple[AckSender, FakeAgent], counter: counting.WorkCounter
) -> None:
    sending, agent = sender
    sending.add(("op", 2, 2, "processed"), 1, 5, None)
    wait_for(lambda: len(agent.posts) == 1, 2.0)
    assert isinstance(agent.posts[0], list)  # nothing counted: the bare array, as before
    counter.add("op", 1, 3, 0.01)
    sending.add(("op", 3, 3, "processed"), 1, 6, None)
    wait_for(lambda: len(agent.posts) == 2, 2.0)
    second = agent.posts[1]
    assert [a["version"] for a in second["acks"]] == [3]
    assert second["counts"][0]["partitions"][0]["rows"] == 3


def test_a_failed_report_is_sent_again_with_its_seq(
    sender: tuple[AckSender, FakeAgent], counter: counting.WorkCounter
) -> None:
    _, agent = sender
    agent.down = True
    counter.add("op", 1, 4, 0.01)
    wait_for(lambda: not counter.pending, 2.0)  # drained into an unsent report
    counter.add("op", 1, 6, 0.01)
    agent.down = False
    wait_for(lambda: sum(p["rows"] for r in agent.reports() for p in r["partitions"]) == 10, 5.0)
    seqs = [r["seq"] for r in agent.reports()]
    assert seqs == sorted(set(seqs))  # each report once, oldest first
