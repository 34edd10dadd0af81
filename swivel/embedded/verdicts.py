"""The consistency verdict of a recorded run, for the whole run or for one plan.

A demo or benchmark run applies several plans to one query (each trial's update, then the
update back), so its schedule holds several update transactions. The whole run is checked
as is; one plan is checked on its own update events and the observations of its target
operators at the versions it switches between, so each trial gets its own violation count.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from swivel.controllers.checker import Verdict, check_schedule
from swivel.controllers.schedule_parsing import parse_schedule
from swivel.jobs.control.recording import complete_lines


def _events(schedule_dir: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(Path(schedule_dir).glob("*.jsonl")):
        if path.name == "schedule.jsonl":
            continue
        for line in complete_lines(path).splitlines():
            if line.strip():
                yield json.loads(line)


def check_run(schedule_dir: Path) -> Verdict:
    return check_schedule(parse_schedule(json.dumps(e) for e in _events(schedule_dir)))


def check_plan(schedule_dir: Path, txn: int, versions: Mapping[str, tuple[int, int]]) -> Verdict:
    """The verdict on plan `txn` alone: `versions` maps each target to (from, to)."""

    def belongs(event: dict[str, Any]) -> bool:
        if event.get("event") == "update":
            return bool(event.get("txn") == txn)
        span = versions.get(str(event.get("operator")))
        return span is not None and event.get("version") in span

    return check_schedule(
        parse_schedule(json.dumps(e) for e in _events(schedule_dir) if belongs(e))
    )
