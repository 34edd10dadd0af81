"""Schedule recording in the check-schedule format, checked by the real checker."""

from __future__ import annotations

from pathlib import Path

from swivel.controllers.checker import check_schedule
from swivel.controllers.schedule_parsing import iter_events
from swivel.jobs.control.recording import ProcessRecorder, merge_schedule, record_update


def test_workers_and_agent_write_a_schedule_the_checker_reads(tmp_path: Path) -> None:
    record_update(tmp_path, "A", 1, 2, txn=2)
    record_update(tmp_path, "B", 1, 2, txn=2)
    first, second = ProcessRecorder(tmp_path, pid=1), ProcessRecorder(tmp_path, pid=2)
    first.record_many(["r1", "r2"], "A", 1)
    second.record_many(["r1", "r2"], "B", 1)
    first.record("r3", "A", 2)
    second.record("r3", "B", 2)
    first.flush()
    second.flush()
    with (tmp_path / "process-3.jsonl").open("a") as killed:
        killed.write('{"event": "process", "record": "r4", "op')  # died mid-write
    merged = merge_schedule(tmp_path)
    with merged.open("rb") as lines:
        verdict = check_schedule(iter_events(lines))
    assert verdict.serializable and verdict.records == 3
    assert merge_schedule(tmp_path) == merged  # merging again ignores its own output


def test_a_mixed_record_is_caught(tmp_path: Path) -> None:
    record_update(tmp_path, "A", 1, 2, txn=2)
    record_update(tmp_path, "B", 1, 2, txn=2)
    worker = ProcessRecorder(tmp_path, pid=1)
    worker.record("r1", "A", 2)
    worker.record("r1", "B", 1)
    worker.flush()
    with merge_schedule(tmp_path).open("rb") as lines:
        assert not check_schedule(iter_events(lines)).serializable
