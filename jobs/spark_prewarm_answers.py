"""Waiting for a prewarm's loads to answer (`StatePrewarm.prewarm`'s second half).

A load runs on its target executor's loader thread, not in a task, so the driver learns
that it ended only from what the load sends back: a message over Spark's RPC to the
helper's registry (`HelperRpc.ANSWER`), or, where that message was lost or the target has
no helper endpoint, the answer block the load put in its block manager. A Spark job that
polls the target is the last resort: its task waits for a slot beside the query's batch.
Kept apart from `spark_prewarm.py` because the wait is the one part of a prewarm with its
own clock and failure modes (a slow target, a lost one, a lost message), and it is
unit-tested against a fake helper with switches (tests/unit/migration/test_prewarm_answers.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from swivel.jobs.spark_helper_jar import java_list

# A prewarm reads the answers its loads sent over Spark's RPC (HelperRpc.ANSWER) each time
# one comes or an answer block is put or removed (the helper's AnswerWatch wakes it), and at
# least every PREWARM_ANSWER_S. The answer blocks (no Spark job: a look-up in the driver's
# BlockManagerMaster and a fetch) are read on every wake only for a target without a helper
# endpoint, and otherwise every PREWARM_FETCH_S, for an answer whose message was lost: a
# driver fetching blocks runs code it never runs otherwise, first inside a migration's
# batches (docs/migration.md, "Answers over RPC"). It also polls
# with a Spark job every PREWARM_POLL_S (one short task per bin, which waits for a slot
# beside the batch: only for an answer whose announcement failed), and waits for the loads
# at most PREWARM_TIMEOUT_S. A target whose block manager has been unregistered for
# PREWARM_LOST_S is lost.
PREWARM_ANSWER_S = 1.0
PREWARM_FETCH_S = 5.0
PREWARM_POLL_S = 30.0
PREWARM_TIMEOUT_S = 180.0
PREWARM_LOST_S = 5.0
# A poll's answers that say the target holds no load of the bin by the asked id, so it will
# never answer: `no-load` (the target lost it), `superseded` (another load replaced it).
LOAD_GONE = ("no-load", "superseded")

Answer = dict[str, Any]


class AnswerWait:
    """The wait for one load call's answers: `target`'s loads of `stores` under `load_id`.
    `poll(bins)` runs the fallback poll job for the bins still waiting."""

    def __init__(
        self,
        helper: Any,
        spark_context: Any,
        *,
        target: str,
        root: str,
        run_id: str,
        stores: Sequence[tuple[int, str]],
        load_id: str,
        poll: Callable[[list[int]], list[Answer]],
    ) -> None:
        self.helper = helper
        self.spark_context = spark_context
        self.target = target
        self.root = root
        self.run_id = run_id
        self.stores = stores
        self.load_id = load_id
        self.poll = poll

    def until_answered(
        self, started: Sequence[Answer], seen: Any, timeout_s: float | None
    ) -> list[Answer]:
        """Every (bin, store)'s answer, from the loads' start answers (`started`: those not
        `loading` are final) and what the loads announce after; `seen` is the helper's
        answer counter read before the loads started (an answer announced before the first
        wait wakes it). Raises TimeoutError after `timeout_s` (None: PREWARM_TIMEOUT_S),
        RuntimeError once the target's block manager has been gone for PREWARM_LOST_S."""
        answers = {_store_key(r): r for r in started if r.get("status") != "loading"}
        waiting = {int(r["partition"]) for r in started if r.get("status") == "loading"}
        if timeout_s is None:
            timeout_s = PREWARM_TIMEOUT_S
        deadline = time.monotonic() + timeout_s
        last_poll = last_fetch = time.monotonic()
        gone_since: float | None = None  # when a read first found `target` unregistered
        helper = self.helper
        while waiting:
            if time.monotonic() > deadline:
                raise TimeoutError(f"bins {sorted(waiting)} still loading after {timeout_s:.0f} s")
            seen = helper.awaitAnswers(self.spark_context, seen, int(_wait_s(gone_since) * 1e3))
            found: list[Answer] = []
            if helper.registered(self.target):
                gone_since = None
                fetch = not helper.answersOverRpc(self.target) or (
                    time.monotonic() - last_fetch >= PREWARM_FETCH_S
                )
                last_fetch = time.monotonic() if fetch else last_fetch
                found = _announced(
                    helper,
                    root=self.root,
                    run_id=self.run_id,
                    bins=sorted(waiting),
                    stores=self.stores,
                    load_id=self.load_id,
                    fetch_blocks=fetch,
                )
            else:  # no fetch from a block manager that left: it could hang on its address
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since >= PREWARM_LOST_S:
                    raise RuntimeError(f"executor {self.target} is gone (its block manager left)")
            if time.monotonic() - last_poll >= PREWARM_POLL_S:
                last_poll = time.monotonic()
                found += [r for r in self.poll(sorted(waiting)) if _answers(r, self.load_id)]
            for result in found:
                # a store answered earlier keeps that answer (a later poll could only repeat
                # it, or answer `no-load` once an activation dropped the record)
                answers.setdefault(_store_key(result), result)
            waiting = {
                b for b in waiting if any((b, op, st) not in answers for op, st in self.stores)
            }
        return list(answers.values())


def _wait_s(gone_since: float | None) -> float:
    """How long the next wait for an answer may sleep: PREWARM_ANSWER_S, shorter while the
    target is unregistered (a lost executor is told from a slow one within PREWARM_LOST_S)."""
    if gone_since is None:
        return PREWARM_ANSWER_S
    return max(0.0, min(PREWARM_ANSWER_S, PREWARM_LOST_S - (time.monotonic() - gone_since)))


def _announced(
    helper: Any,
    *,
    root: str,
    run_id: str,
    bins: Sequence[int],
    stores: Sequence[tuple[int, str]],
    load_id: str,
    fetch_blocks: bool,
) -> list[Answer]:
    """The answers load `load_id` announced so far for `bins` (no Spark job): those sent
    over RPC, and with `fetch_blocks` those only in an answer block."""
    found: list[Answer] = []
    for operator, store in stores:
        answers = helper.announced(root, operator, store, run_id, load_id, list(bins), fetch_blocks)
        found.extend(json.loads(str(a)) for a in java_list(answers))
    return found


def new_load_id() -> str:
    """A fresh id for one load call: its answers, polls and release name it."""
    return uuid.uuid4().hex


def _answers(result: Answer, load_id: str) -> bool:
    """Whether a poll's answer ends the wait of load `load_id`: its own answer, or one of
    `LOAD_GONE`."""
    if result.get("status") in LOAD_GONE:
        return True
    return result.get("status") != "loading" and result.get("load_id") == load_id


def _store_key(result: Answer) -> tuple[int, int, str]:
    """(bin, operator, store) of one answer."""
    return int(result["partition"]), int(result["operator"]), str(result["store"])
