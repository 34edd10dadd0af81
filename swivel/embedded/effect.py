"""When a reconfiguration was *in effect*, read from the recorded schedule.

Definition (docs/benchmarks.md): from the request until every target operator has
processed records under its new version **and** no target will process another record
under its old one. Every `process` event the runtime records carries `at`, the moment its
rows were processed (their output emitted, `swivel.jobs.runtime.operators`), so both halves
are read off the schedule:

- `first_new[op]`: the first event of target `op` at its new version;
- `last_old[op]`: the last event of `op` at its old version (a Fries tag-follower runs the
  rows its heads tagged before the switch under the old version; they reach it only when
  the upstream stage of that micro-batch ends);
- in effect = max over targets of both; the delay is that minus the request.

A run applies the trial's update and then the update back, and versions only grow, so
events at a target's `(old, new)` versions belong to this trial alone.

The same pass keeps what the timeline plot (`timeline.plot_switch`) shows: each worker's
first record under the new version of every target (a head's switch), and each operator's
activity per micro-batch (first and last record: the stage boundaries a row meets).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swivel.jobs.control.recording import complete_lines

WINDOW_BEFORE_S = 2.0  # activity kept for the plot before the request


@dataclass
class Span:
    """One operator's records of one micro-batch: when the first and the last ran."""

    operator: str
    batch: int | None
    start: float
    end: float
    old: int = 0  # records at a target's old version
    new: int = 0  # ... at its new version
    other: int = 0  # records of an operator the update does not change

    def add(self, at: float, kind: str) -> None:
        self.start, self.end = min(self.start, at), max(self.end, at)
        setattr(self, kind, getattr(self, kind) + 1)


@dataclass
class Effect:
    requested_at: float
    versions: Mapping[str, tuple[int, int]]  # target -> (old, new)
    first_new: dict[str, float] = field(default_factory=dict)
    last_old: dict[str, float] = field(default_factory=dict)
    worker_first_new: dict[tuple[int, str], float] = field(default_factory=dict)
    spans: dict[tuple[str, int | None], Span] = field(default_factory=dict)

    @property
    def in_effect_at(self) -> float | None:
        """None until every target ran a record under its new version."""
        if any(op not in self.first_new for op in self.versions):
            return None
        moments = [*self.first_new.values(), *self.last_old.values()]
        return max(moments) if moments else None

    @property
    def delay_ms(self) -> float | None:
        at = self.in_effect_at
        return None if at is None else max(0.0, (at - self.requested_at) * 1000.0)

    def ms(self, at: float | None) -> float | None:
        return None if at is None else self.since(at)

    def since(self, at: float) -> float:
        """ms after the request."""
        return round((at - self.requested_at) * 1000.0, 1)

    def summary(self) -> dict[str, Any]:
        """The trial's figures in ms after the request (the benchmark's JSON keeps them)."""
        return {
            "in_effect_ms": self.ms(self.in_effect_at),
            "first_new_ms": {op: self.ms(at) for op, at in sorted(self.first_new.items())},
            "last_old_ms": {op: self.ms(at) for op, at in sorted(self.last_old.items())},
        }


def _events(schedule_dir: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(pid, event) for every complete `process` line of the per-process files."""
    for path in sorted(Path(schedule_dir).glob("process-*.jsonl")):
        try:
            pid = int(path.stem.split("-", 1)[1])
        except ValueError:
            continue
        for line in complete_lines(path).splitlines():
            if '"at"' in line:
                yield pid, json.loads(line)


def measure(
    schedule_dir: Path,
    versions: Mapping[str, tuple[int, int]],
    requested_at: float,
    until: float | None = None,
) -> Effect:
    """The in-effect moment of the update `versions` requested at `requested_at`, and the
    activity from `WINDOW_BEFORE_S` before it to `until` (default: everything after)."""
    effect = Effect(requested_at, dict(versions))
    since = requested_at - WINDOW_BEFORE_S
    for pid, event in _events(schedule_dir):
        at, operator, version = float(event["at"]), str(event["operator"]), event["version"]
        span = versions.get(operator)
        kind = "other"
        if span is not None:
            old, new = span
            if version == new:
                kind = "new"
                if at < effect.first_new.get(operator, float("inf")):
                    effect.first_new[operator] = at
                key = (pid, operator)
                if at < effect.worker_first_new.get(key, float("inf")):
                    effect.worker_first_new[key] = at
            elif version == old:
                kind = "old"
                if at >= requested_at and at > effect.last_old.get(operator, 0.0):
                    effect.last_old[operator] = at
        if at < since or (until is not None and at > until):
            continue
        batch = event.get("batch")
        slot = (operator, batch)
        if slot not in effect.spans:
            effect.spans[slot] = Span(operator, batch, at, at)
        effect.spans[slot].add(at, kind)
    return effect
