"""Recording a schedule for `swivel check-schedule` (JSON lines, see its --help).

Every worker process appends `process` events to its own file (`process-<pid>.jsonl`) in
`SWIVEL_SCHEDULE_DIR`, so no two processes ever write one file; the agent writes the
`update` events (`updates.jsonl`) when it accepts a plan. `merge_schedule` concatenates
them into one file for the checker. Standard library only (imported by workers).

Workers are killed without running exit handlers, so buffered lines are written when the
buffer is large or old, and the runtime calls `flush()` at the end of each Arrow batch.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ENV_SCHEDULE_DIR = "SWIVEL_SCHEDULE_DIR"
MERGED_NAME = "schedule.jsonl"
UPDATES_NAME = "updates.jsonl"
FLUSH_LINES = 2000
FLUSH_AGE_S = 0.2


class ProcessRecorder:
    """Buffers one process's `process` events and appends them to its own file."""

    def __init__(self, directory: Path, pid: int | None = None) -> None:
        self.path = Path(directory) / f"process-{os.getpid() if pid is None else pid}.jsonl"
        self._lines: list[str] = []
        self._oldest = 0.0

    def record(self, record: str, operator: str, version: int) -> None:
        self.record_many((record,), operator, version)

    def record_many(self, records: Iterable[str], operator: str, version: int) -> None:
        """One line per record: `record` is the source record id the tuple derives from."""
        if not self._lines:
            self._oldest = time.monotonic()
        self._lines.extend(
            json.dumps(
                {"event": "process", "record": str(r), "operator": operator, "version": version}
            )
            for r in records
        )
        if len(self._lines) >= FLUSH_LINES or time.monotonic() - self._oldest >= FLUSH_AGE_S:
            self.flush()

    def flush(self) -> None:
        if not self._lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write("\n".join(self._lines) + "\n")
        self._lines = []


class _PerProcess:
    recorder: ProcessRecorder | None = None
    pid: int | None = None


def recorder() -> ProcessRecorder | None:
    """This process's recorder, or None when recording is off (no SWIVEL_SCHEDULE_DIR)."""
    if _PerProcess.pid != os.getpid():
        directory = os.environ.get(ENV_SCHEDULE_DIR)
        _PerProcess.recorder = ProcessRecorder(Path(directory)) if directory else None
        _PerProcess.pid = os.getpid()
    return _PerProcess.recorder


def record_update(
    directory: Path, operator: str, from_version: int, to_version: int, txn: int
) -> None:
    """The agent's `update` line, written when it accepts a plan."""
    directory.mkdir(parents=True, exist_ok=True)
    line = {"event": "update", "operator": operator, "from": from_version, "to": to_version}
    line["txn"] = txn
    with (directory / UPDATES_NAME).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def merge_schedule(directory: Path, output: Path | None = None) -> Path:
    """Concatenate every event file in `directory` into one schedule for the checker."""
    directory = Path(directory)
    target = output or directory / MERGED_NAME
    sources = sorted(p for p in directory.glob("*.jsonl") if p.resolve() != target.resolve())
    with target.open("w", encoding="utf-8") as out:
        for source in sources:
            out.write(complete_lines(source))
    return target


def complete_lines(path: Path) -> str:
    """The file's text up to its last newline: a worker killed mid-write leaves a partial
    last line, which no reader may take for an event."""
    text = Path(path).read_text(encoding="utf-8")
    return text if text.endswith("\n") else text[: text.rfind("\n") + 1]


def process_events(directory: Path) -> list[dict[str, Any]]:
    """Every complete `process` event the worker processes recorded in `directory`."""
    return [
        json.loads(line)
        for path in sorted(Path(directory).glob("process-*.jsonl"))
        for line in complete_lines(path).splitlines()
    ]
