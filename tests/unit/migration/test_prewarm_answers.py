"""How a prewarm waits for its loads (`StatePrewarm.prewarm`): the answers come over Spark's
RPC or through the block manager with no Spark job (the blocks fetched at every wake only
from a target without a helper endpoint), a poll job runs only as a fallback and takes only
this load's answers, and a target whose block manager left ends the wait. The JVM side is a fake
with switches (the real one runs in tests/integration/cluster/test_prewarm.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from swivel.jobs import spark_prewarm_answers
from swivel.jobs.spark_prewarm import StatePrewarm


class FakeContext:
    class _jsc:  # noqa: N801 (PySpark's SparkContext._jsc)
        @staticmethod
        def sc() -> str:
            return "the-spark-context"


class FakeInternals:
    _jvm = None
    sc = FakeContext()

    def state_root(self, query: Any) -> str:
        return "/checkpoint/state"

    def _coordinator(self) -> str:
        return "the-coordinator"


class FakeQuery:
    runId = "run-1"  # noqa: N815 (PySpark's StreamingQuery.runId)


class JavaList:
    """What py4j hands back for a `java.util.List`, as far as `java_list` reads it: its size
    and each element. Nothing else: the real one ends a Python loop on a Java exception,
    which costs ~75 round trips."""

    def __init__(self, values: Any) -> None:
        self._values = list(values)

    def size(self) -> int:
        return len(self._values)

    def get(self, index: int) -> str:
        return str(self._values[index])


class FakeHelper:
    def __init__(self, owner: ScriptedPrewarm) -> None:
        self.owner = owner

    def answerUpdates(self, sc: str) -> int:  # the JVM method, called through py4j
        return self.owner.updates

    def awaitAnswers(self, sc: str, seen: int, timeout_ms: int) -> int:
        """As AnswerWatch: until an answer block changed since `seen`, or the timeout (the
        scripted announcements come with no block update: each read waits the timeout)."""
        self.owner.waits_ms.append(timeout_ms)
        end = time.monotonic() + timeout_ms / 1e3
        while self.owner.updates == seen and time.monotonic() < end:
            time.sleep(0.001)
        return self.owner.updates

    def registered(self, executor: str) -> bool:
        self.owner.registered_reads += 1
        return self.owner.target_registered

    def answersOverRpc(self, executor: str) -> bool:  # the JVM method, called through py4j
        return self.owner.endpoint

    def announced(  # noqa: PLR0917 (the JVM method's signature, called through py4j)
        self,
        root: str,
        operator: int,
        store: str,
        run_id: str,
        load_id: str,
        bins: list[int],
        fetch_blocks: bool,
    ) -> JavaList:
        sent = self.owner.sent.pop(load_id, [])
        fetched = self.owner.announced(bins, load_id) if fetch_blocks else []
        return JavaList(json.dumps(a) for a in sent + fetched)

    def releaseShadows(  # the JVM method, called through py4j
        self, coordinator: str, bins: list[str], stores: list[str], root: str, run_id: str
    ) -> None:
        self.owner.released_shadows.append((coordinator, bins, stores, root, run_id))


class ScriptedPrewarm(StatePrewarm):
    """The Spark jobs (`_run`) and the announcements (`FakeHelper.announced`) of one target, scripted:
    `announce_after` reads before bin 7's answer is announced (None: never), `poll_answers`
    what a poll job returns."""

    def __init__(self) -> None:
        super().__init__(FakeInternals())  # type: ignore[arg-type]
        self.jobs: list[str] = []
        self.load_ids: list[str] = []
        self.announce_after: int | None = 2
        self.blocks: dict[str, list[dict[str, Any]]] = {}  # load id -> its announced answers
        self.sent: dict[str, list[dict[str, Any]]] = {}  # load id -> answers sent over RPC
        self.endpoint = False  # whether the target has a helper endpoint (sends answers)
        self.fetch_times: list[float] = []  # when the answer blocks were read
        self.announced_reads = 0
        self.registered_reads = 0
        self.target_registered = True
        self.poll_answers: list[dict[str, Any]] = []
        self.released_shadows: list[tuple[str, list[str], list[str], str, str]] = []
        self.updates = 0  # answer-block updates the fake AnswerWatch has seen
        self.waits_ms: list[int] = []

    def _helper(self) -> Any:
        return FakeHelper(self)

    def _run(self, action: str, query: Any, bins: Any, executor: str, **kw: Any) -> list[Any]:
        self.jobs.append(action)
        if action == "load":
            self.load_ids.append(kw["load_id"])
            return [answer(b, "loading", kw["load_id"]) for b in bins]
        return list(self.poll_answers)

    def announced(self, bins: Sequence[int], load_id: str) -> list[dict[str, Any]]:
        self.announced_reads += 1
        self.fetch_times.append(time.monotonic())
        if self.announce_after is not None and self.announced_reads >= self.announce_after:
            self.blocks.setdefault(load_id, [answer(b, "loaded", load_id) for b in bins])
        return list(self.blocks.get(load_id, []))  # only this load's blocks


def answer(bin_id: int, status: str, load_id: str) -> dict[str, Any]:
    return {"partition": bin_id, "operator": 0, "store": "default", "status": status,
            "executor": "1", "load_id": load_id}  # fmt: skip


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_ANSWER_S", 0.001)


def test_an_announced_answer_ends_the_wait_without_a_poll_job() -> None:
    prewarm = ScriptedPrewarm()
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3)
    assert [r["status"] for r in results] == ["loaded"]
    assert results[0]["load_id"] == prewarm.load_ids[0]
    assert prewarm.jobs == ["load"]  # the start only: no job read the answer


def test_a_poll_job_takes_only_this_loads_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_POLL_S", 0.0)
    prewarm = ScriptedPrewarm()
    prewarm.announce_after = None  # the announcement failed
    prewarm.poll_answers = [answer(7, "loaded", "an-earlier-load"), answer(7, "loading", "")]
    with pytest.raises(TimeoutError):
        prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3, timeout_s=1.0)
    assert prewarm.jobs.count("poll") >= 2  # polled, and took neither answer
    prewarm = ScriptedPrewarm()
    prewarm.announce_after = None
    prewarm.poll_answers = [answer(7, "loaded", "")]
    original_run = prewarm._run

    def run_naming_the_load(action: str, *args: Any, **kw: Any) -> list[Any]:
        found = original_run(action, *args, **kw)
        return [{**r, "load_id": prewarm.load_ids[0]} for r in found]

    prewarm._run = run_naming_the_load  # type: ignore[method-assign]
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3, timeout_s=5.0)
    assert [r["status"] for r in results] == ["loaded"] and "poll" in prewarm.jobs


def test_a_target_whose_block_manager_left_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_ANSWER_S", 0.05)
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_LOST_S", 0.2)
    prewarm = ScriptedPrewarm()
    prewarm.target_registered = False
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="executor 1 is gone"):
        prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3, timeout_s=30.0)
    assert 0.2 <= time.monotonic() - began < 5.0  # PREWARM_LOST_S, not the timeout
    assert prewarm.registered_reads >= 2
    assert prewarm.announced_reads == 0  # nothing is fetched from a block manager that left


def test_an_answer_block_update_wakes_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between reads the wait sleeps until an answer block changes, not for a fixed period:
    the load's announcement (a block put, 0.2 s in) ends a sleep of up to 30 s at once."""
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_ANSWER_S", 30.0)
    prewarm = ScriptedPrewarm()
    prewarm.announce_after = None

    def announce() -> None:
        load_id = prewarm.load_ids[0]
        prewarm.blocks[load_id] = [answer(7, "loaded", load_id)]
        prewarm.updates += 1  # the block manager's update event, as AnswerWatch counts it

    began = time.monotonic()  # before the timer starts: the update comes 0.2 s after it
    threading.Timer(0.2, announce).start()
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3)
    assert [r["status"] for r in results] == ["loaded"]
    assert 0.15 <= time.monotonic() - began < 5.0  # woken by the update, not the 30 s
    assert prewarm.waits_ms == [30_000]  # one wait, one read


def test_a_wait_for_an_unregistered_target_ends_when_it_counts_as_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_ANSWER_S", 1.0)
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_LOST_S", 5.0)
    now = time.monotonic()
    assert spark_prewarm_answers._wait_s(None) == 1.0  # registered: the full wait
    assert spark_prewarm_answers._wait_s(now) == pytest.approx(1.0)  # lost only in 5 s
    assert spark_prewarm_answers._wait_s(now - 4.7) == pytest.approx(0.3, abs=0.05)  # not past 5 s
    assert spark_prewarm_answers._wait_s(now - 6.0) == 0.0


def test_an_earlier_loads_answer_does_not_end_a_new_wait() -> None:
    """The first load of bin 7 answered; a second load of it waits for its own answer (here
    one that never comes) instead of taking the first one's."""
    prewarm = ScriptedPrewarm()
    first = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3)
    prewarm.announce_after = None  # the second load's answer does not come
    with pytest.raises(TimeoutError):
        prewarm.prewarm(FakeQuery(), [7], "1", "h", version=4, timeout_s=0.5)
    earlier, later = prewarm.load_ids
    assert earlier != later and first[0]["load_id"] == earlier
    assert later not in prewarm.blocks and prewarm.blocks[earlier]  # still announced


@pytest.mark.parametrize(
    "status",
    [
        "no-load",  # the target holds no load of the bin (it lost it)
        "superseded",  # the bin's load there is another one (a later step's)
    ],
)
def test_a_poll_that_finds_this_load_gone_ends_the_wait(
    status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This load will never answer, so the wait ends at once instead of at its timeout; the
    caller then moves the bin the plain way, on the answer's status."""
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_POLL_S", 0.0)
    prewarm = ScriptedPrewarm()
    prewarm.announce_after = None
    prewarm.poll_answers = [answer(7, status, "")]
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3, timeout_s=5.0)
    assert [r["status"] for r in results] == [status]


def test_a_load_named_by_its_caller_is_polled_and_released_by_that_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_POLL_S", 0.0)
    prewarm = ScriptedPrewarm()
    prewarm.announce_after = None
    prewarm.poll_answers = [answer(7, "loaded", "step-1")]
    seen: list[tuple[str, str]] = []
    original_run = prewarm._run

    def run(action: str, *args: Any, **kw: Any) -> list[Any]:
        seen.append((action, kw.get("load_id", "")))
        return original_run(action, *args, **kw)

    prewarm._run = run  # type: ignore[method-assign]
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3, load_id="step-1")
    assert [r["status"] for r in results] == ["loaded"]
    assert ("load", "step-1") in seen and ("poll", "step-1") in seen


def test_a_release_keeps_the_shadow_of_a_bin_a_later_load_took_over() -> None:
    """A late release of a timed-out step: bin 7's load is by now a later step's
    (`superseded`), so its shadow id is not pointed away; bin 8's copy is released, through
    the helper's one release (`releaseShadows`: bin numbers, "operator\tstore" entries)."""
    prewarm = ScriptedPrewarm()
    prewarm.poll_answers = [answer(7, "superseded", "old"), answer(8, "released", "old")]
    results = prewarm.release(FakeQuery(), [7, 8], "1", "h", load_id="old")
    assert [r["status"] for r in results] == ["superseded", "released"]
    assert prewarm.released_shadows == [
        ("the-coordinator", ["8"], ["0\tdefault"], "/checkpoint/state", "run-1")
    ]


def test_a_release_that_keeps_every_shadow_calls_no_helper() -> None:
    prewarm = ScriptedPrewarm()
    prewarm.poll_answers = [answer(7, "superseded", "old")]
    prewarm.release(FakeQuery(), [7], "1", "h", load_id="old")
    assert prewarm.released_shadows == []


def test_an_answer_sent_over_rpc_ends_the_wait_without_reading_a_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A target with a helper endpoint sends its loads' answers to the driver: the wait takes
    them as they come and fetches no answer block (a driver's first block fetch would run
    inside a migration's batches)."""
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_ANSWER_S", 30.0)
    prewarm = ScriptedPrewarm()
    prewarm.endpoint = True
    prewarm.announce_after = None  # no block either way: only the message answers

    def send() -> None:
        load_id = prewarm.load_ids[0]
        prewarm.sent[load_id] = [answer(7, "loaded", load_id)]
        prewarm.updates += 1  # the registry wakes the waits (AnswerWatch.answered)

    began = time.monotonic()
    threading.Timer(0.2, send).start()
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3)
    assert [r["status"] for r in results] == ["loaded"]
    assert 0.15 <= time.monotonic() - began < 5.0  # woken by the message, not the 30 s
    assert prewarm.announced_reads == 0  # no block read
    assert prewarm.jobs == ["load"]


def test_an_answer_whose_message_was_lost_is_read_from_its_block_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The message lost (or never sent), the answer block still ends the wait: read every
    PREWARM_FETCH_S, not at every wake, while the target has an endpoint."""
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_ANSWER_S", 0.01)
    monkeypatch.setattr(spark_prewarm_answers, "PREWARM_FETCH_S", 0.3)
    prewarm = ScriptedPrewarm()
    prewarm.endpoint = True
    prewarm.announce_after = 1  # the block is there from the first read on
    began = time.monotonic()
    results = prewarm.prewarm(FakeQuery(), [7], "1", "h", version=3)
    assert [r["status"] for r in results] == ["loaded"]
    assert prewarm.fetch_times and prewarm.fetch_times[0] - began >= 0.3
    assert prewarm.announced_reads == 1  # one read, at the first fetch tick
