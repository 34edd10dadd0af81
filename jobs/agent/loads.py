"""Load statistics the driver measures for the bin policies (docs/control-protocol.md, "Loads").

The driver (`swivel.jobs.migration.driver.MigrationDriver`) measures per-bin records and
state size and per-executor busy time and memory after batches, at most once per
coordination interval, and posts them (`POST /v1/driver/loads`); the agent keeps the
latest document, serves it at `GET /v1/loads` (with its age) and as gauges in `/metrics`.
The operator's policy timers read `GET /v1/loads` (`ClientAgentLink.loads`).

`parse_loads` refuses a malformed body field by field (400) before anything is kept.
"""

from __future__ import annotations

import math
from typing import Any

from swivel.api.errors import FieldProblem

EXECUTOR_NUMBERS = (
    "busySeconds",
    "windowSeconds",
    "busyFraction",
    "memoryBytes",
    "memoryLimitBytes",
    "jvmMemoryUsedBytes",
    "jvmMemoryMaxBytes",
    "cores",
)
BIN_NUMBERS = ("records", "taskMs", "stateRows", "stateBytes")
TOP_NUMBERS = ("measuredAt", "windowSeconds", "coordinationSeconds", "processingSeconds")


class LoadsRejected(ValueError):  # noqa: N818 - reads as the outcome, like PlanRejected
    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def _number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def parse_loads(body: Any, bins: int) -> dict[str, Any]:
    """The body as kept (a copy), or LoadsRejected naming each bad field."""
    if not isinstance(body, dict):
        raise LoadsRejected([FieldProblem("body", "expected a JSON object")])
    problems: list[FieldProblem] = []
    for name in TOP_NUMBERS:
        if name in body and not _number(body[name]):
            problems.append(FieldProblem(name, "a non-negative number"))
    interval = body.get("coordinationIntervalSeconds")
    if interval is not None and not (_number(interval) and interval > 0):
        problems.append(FieldProblem("coordinationIntervalSeconds", "a positive number or null"))
    executors, bin_loads = body.get("executors"), body.get("bins")
    if not isinstance(executors, list):
        problems.append(FieldProblem("executors", "required: an array"))
        executors = []
    if not isinstance(bin_loads, list):
        problems.append(FieldProblem("bins", "required: an array"))
        bin_loads = []
    seen_executors: set[str] = set()
    for index, entry in enumerate(executors):
        where = f"executors[{index}]"
        if not isinstance(entry, dict):
            problems.append(FieldProblem(where, "expected an object"))
            continue
        executor = entry.get("executor")
        if not isinstance(executor, str) or not executor:
            problems.append(FieldProblem(f"{where}.executor", "required: the executor id"))
        elif executor in seen_executors:
            problems.append(FieldProblem(f"{where}.executor", f"{executor!r} listed twice"))
        else:
            seen_executors.add(executor)
        problems += [
            FieldProblem(f"{where}.{name}", "a non-negative number")
            for name in EXECUTOR_NUMBERS
            if name in entry and not _number(entry[name])
        ]
    seen_bins: set[int] = set()
    for index, entry in enumerate(bin_loads):
        where = f"bins[{index}]"
        if not isinstance(entry, dict):
            problems.append(FieldProblem(where, "expected an object"))
            continue
        bin_id = entry.get("bin")
        if not isinstance(bin_id, int) or isinstance(bin_id, bool) or not 0 <= bin_id < bins:
            problems.append(FieldProblem(f"{where}.bin", f"an integer in [0, {bins})"))
        elif bin_id in seen_bins:
            problems.append(FieldProblem(f"{where}.bin", f"bin {bin_id} listed twice"))
        else:
            seen_bins.add(bin_id)
        if not isinstance(entry.get("executor"), str) or not entry.get("executor"):
            problems.append(FieldProblem(f"{where}.executor", "required: the executor id"))
        problems += [
            FieldProblem(f"{where}.{name}", "a non-negative number")
            for name in BIN_NUMBERS
            if name in entry and not _number(entry[name])
        ]
    if problems:
        raise LoadsRejected(problems)
    return {
        **body,
        "executors": [dict(e) for e in executors],
        "bins": [dict(b) for b in bin_loads],
    }
