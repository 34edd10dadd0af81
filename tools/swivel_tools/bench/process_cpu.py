"""CPU time of the processes a benchmark runs on, per group, from `/proc` (Linux).

Wall time on a shared 2-core machine moves with everybody else's load; the CPU time the
query's own processes use per batch moves much less. `ProcessCpu.sample()` sums
utime + stime (+ the reaped children's) over:

- `executor_jvm`: the executor JVMs (descendants of the standalone workers that are `java`),
- `python_workers`: the PySpark daemons and their forked workers under them,
- `driver_jvm`: this process's `java` children (the driver JVM py4j started), but for the
  local cluster's daemons,
- `cluster_daemons`: the local cluster's master and worker JVMs themselves (their own CPU;
  they are this process's children too. Until 2026-11-27 they were counted in
  `driver_jvm`: the groups' total is unchanged),
- `driver_python`: this process (every thread: listeners, the control and load threads),
- `agent`: the agent subprocess, when `agent_pid()` names one.

A process that exits is counted by its parent once reaped (cutime), so a sum over the live
tree covers forked workers that came and went.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

GROUPS = (
    "executor_jvm",
    "python_workers",
    "driver_jvm",
    "cluster_daemons",
    "driver_python",
    "agent",
)


class ProcStat(NamedTuple):
    """One /proc/<pid>/stat (or a thread's /proc/<pid>/task/<tid>/stat), CPU in seconds.

    `children` is what the process's reaped children used (a thread's file repeats its
    process's figure there: count a thread's `own` only)."""

    parent: int
    command: str  # the process's (or thread's) name, cut to 15 characters
    own: float  # utime + stime
    children: float  # cutime + cstime

    @property
    def cpu(self) -> float:
        return self.own + self.children


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_stat(path: str) -> ProcStat | None:
    """The stat file at `path`; None when it is gone (the process or thread ended)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stat:
            raw = stat.read()
    except OSError:
        return None
    command = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    own = (int(fields[11]) + int(fields[12])) / _TICKS
    children = (int(fields[13]) + int(fields[14])) / _TICKS
    return ProcStat(int(fields[1]), command, own, children)


def processes() -> dict[int, ProcStat]:
    """Every process's stat, by pid."""
    table: dict[int, ProcStat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := read_stat(f"/proc/{name}/stat")) is not None:
            table[int(name)] = stat
    return table


def descendants(table: dict[int, ProcStat], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.parent, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


@dataclass
class ProcessCpu:
    daemon_pids: Iterable[int]  # the local cluster's master and worker JVMs (LocalCluster.pids())
    agent_pid: Callable[[], int | None] = field(default=lambda: None)

    def sample(self) -> dict[str, float]:
        """CPU seconds per group so far; {} where /proc is missing."""
        if not os.path.isdir("/proc"):
            return {}
        times = os.times()
        return groups(
            processes(),
            me=os.getpid(),
            daemons=set(self.daemon_pids),
            agent=self.agent_pid(),
            driver_python=times.user + times.system,
        )


def groups(
    table: dict[int, ProcStat],
    *,
    me: int,
    daemons: set[int],
    agent: int | None,
    driver_python: float,
) -> dict[str, float]:
    """CPU seconds per group of one process table (`me`: the bench's own process)."""
    spent = dict.fromkeys(GROUPS, 0.0)
    for root in daemons:
        if root in table:
            spent["cluster_daemons"] += table[root].own
            # what it reaped: the executors that exited (a worker's children), and launchers
            spent["executor_jvm"] += table[root].children
        for pid in descendants(table, root):
            stat = table[pid]
            group = "executor_jvm" if stat.command == "java" else "python_workers"
            spent[group] += stat.cpu
    for pid, stat in table.items():
        if stat.parent == me and stat.command == "java" and pid not in daemons:
            spent["driver_jvm"] += stat.cpu
        elif agent is not None and pid == agent:
            spent["agent"] += stat.cpu
    spent["driver_python"] = driver_python
    return spent


def per_batch_ms(
    before: dict[str, float], after: dict[str, float], batches: int
) -> dict[str, float]:
    """CPU milliseconds per batch per group between two samples, and their total."""
    if not before or not after or batches <= 0:
        return {}
    spent = {k: round((after[k] - before[k]) * 1000 / batches, 1) for k in GROUPS}
    return {**spent, "total": round(sum(spent.values()), 1)}
