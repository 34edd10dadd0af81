"""CPU time of the processes a benchmark runs on, per group, from `/proc` (Linux).

Wall time on a shared 2-core machine moves with everybody else's load; the CPU time the
query's own processes use per batch moves much less. `ProcessCpu.sample()` sums
utime + stime (+ the reaped children's) over:

- `executor_jvm`: the executor JVMs (descendants of the standalone workers that are `java`),
- `python_workers`: the PySpark daemons and their forked workers under them,
- `driver_jvm`: this process's `java` children (the driver JVM py4j started),
- `driver_python`: this process (every thread: listeners, the control and load threads),
- `agent`: the agent subprocess, when `agent_pid()` names one.

A process that exits is counted by its parent once reaped (cutime), so a sum over the live
tree covers forked workers that came and went.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

GROUPS = ("executor_jvm", "python_workers", "driver_jvm", "driver_python", "agent")


def processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds incl. reaped children)."""
    ticks = os.sysconf("SC_CLK_TCK")
    table: dict[int, tuple[int, str, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as stat:
                raw = stat.read()
        except OSError:
            continue
        command = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        cpu = sum(int(value) for value in fields[11:15]) / ticks  # utime stime cutime cstime
        table[int(name)] = (int(fields[1]), command, cpu)
    return table


def descendants(table: dict[int, tuple[int, str, float]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


@dataclass
class ProcessCpu:
    worker_pids: Iterable[int]  # the standalone Worker JVMs (LocalCluster)
    agent_pid: Callable[[], int | None] = field(default=lambda: None)

    def sample(self) -> dict[str, float]:
        """CPU seconds per group so far; {} where /proc is missing."""
        if not os.path.isdir("/proc"):
            return {}
        table = processes()
        groups = dict.fromkeys(GROUPS, 0.0)
        for root in self.worker_pids:
            for pid in descendants(table, root):
                _, command, cpu = table[pid]
                groups["executor_jvm" if command == "java" else "python_workers"] += cpu
        me, agent = os.getpid(), self.agent_pid()
        for pid, (parent, command, cpu) in table.items():
            if parent == me and command == "java":
                groups["driver_jvm"] += cpu
            elif agent is not None and pid == agent:
                groups["agent"] += cpu
        times = os.times()
        groups["driver_python"] = times.user + times.system
        return groups


def per_batch_ms(
    before: dict[str, float], after: dict[str, float], batches: int
) -> dict[str, float]:
    """CPU milliseconds per batch per group between two samples, and their total."""
    if not before or not after or batches <= 0:
        return {}
    spent = {k: round((after[k] - before[k]) * 1000 / batches, 1) for k in GROUPS}
    return {**spent, "total": round(sum(spent.values()), 1)}
