"""The overhead and coordination benches' CPU groups: the local cluster's master and worker
are children of the bench's process, like the driver JVM, and must not count as it."""

from __future__ import annotations

from swivel_tools.bench.process_cpu import GROUPS, ProcStat, groups

ME, DRIVER_JVM, MASTER, WORKER, EXECUTOR, PY_DAEMON, AGENT = 10, 11, 12, 13, 14, 15, 16

TABLE = {
    ME: ProcStat(1, "python", 3.0, 0.0),
    DRIVER_JVM: ProcStat(ME, "java", 5.0, 0.5),
    MASTER: ProcStat(ME, "java", 1.0, 0.0),
    WORKER: ProcStat(ME, "java", 2.0, 7.0),  # 7 s: an executor it reaped earlier
    EXECUTOR: ProcStat(WORKER, "java", 20.0, 0.0),
    PY_DAEMON: ProcStat(EXECUTOR, "python3", 4.0, 1.0),
    AGENT: ProcStat(ME, "python", 0.7, 0.0),
}


def test_each_process_counts_in_one_group() -> None:
    spent = groups(TABLE, me=ME, daemons={MASTER, WORKER}, agent=AGENT, driver_python=3.0)
    assert set(spent) == set(GROUPS)
    assert spent == {
        "executor_jvm": 27.0,  # with the executor the worker reaped
        "python_workers": 5.0,
        "driver_jvm": 5.5,  # not the master's or the worker's
        "cluster_daemons": 3.0,  # their own CPU
        "driver_python": 3.0,
        "agent": 0.7,
    }


def test_the_groups_total_is_every_process_once() -> None:
    spent = groups(TABLE, me=ME, daemons={MASTER, WORKER}, agent=AGENT, driver_python=3.0)
    everything = sum(s.cpu for pid, s in TABLE.items() if pid != ME)
    assert sum(spent.values()) - spent["driver_python"] == everything


def test_without_a_cluster_every_java_child_is_the_driver_jvm() -> None:
    table = {pid: stat for pid, stat in TABLE.items() if pid in (ME, DRIVER_JVM)}
    spent = groups(table, me=ME, daemons=set(), agent=None, driver_python=3.0)
    assert (spent["driver_jvm"], spent["cluster_daemons"]) == (5.5, 0.0)
