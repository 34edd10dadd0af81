"""`swivel bench migration`'s pure parts: the balanced swap it migrates, the excess latency
it reports, the throttled storage's settings, read log and arithmetic (no Spark)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from swivel_tools.bench import migration_figures as figures


def placement(bins: int, executors: tuple[str, ...] = ("1", "0")) -> dict[int, str]:
    return {b: executors[b % len(executors)] for b in range(bins)}


def test_a_swap_keeps_every_executor_share_and_moves_from_each() -> None:
    before = placement(64)
    after = figures.swap_placement(before, 8)
    moved = figures.moved_bins(before, after)
    assert len(moved) == 16
    assert Counter(before.values()) == Counter(after.values())  # 32/32 before and after
    givers = Counter(before[b] for b in moved)
    takers = Counter(after[b] for b in moved)
    assert givers == takers == {"0": 8, "1": 8}
    assert all(before[b] != after[b] for b in moved)


def test_three_executors_give_round_the_cycle() -> None:
    before = placement(12, ("a", "b", "c"))
    after = figures.swap_placement(before, 2)
    moved = figures.moved_bins(before, after)
    assert {(before[b], after[b]) for b in moved} == {("a", "b"), ("b", "c"), ("c", "a")}
    assert Counter(after.values()) == Counter(before.values())


def test_a_swap_refuses_what_it_cannot_balance() -> None:
    with pytest.raises(ValueError, match="two executors"):
        figures.swap_placement({0: "a", 1: "a"}, 1)
    with pytest.raises(ValueError, match="at least 3"):
        figures.swap_placement(placement(4), 3)


def test_excess_is_the_worst_window_batch_over_the_steady_median() -> None:
    window = [(10, 900.0, 100.0), (11, 2_500.0, 103.0), (12, 1_100.0, 104.5)]
    spike = figures.excess(window, [1_000.0, 800.0, 1_200.0, 950.0])
    assert spike.worst_batch == 11
    assert spike.max_batch_ms == 2_500.0
    assert spike.steady_p50_ms == 975.0
    assert spike.excess_ms == 1_525.0
    # a migration that adds nothing has an excess at or below zero, not clipped
    assert figures.excess([(1, 700.0, 1.0)], [1_000.0]).excess_ms == -300.0


def test_excess_needs_both_sides() -> None:
    with pytest.raises(ValueError, match="window"):
        figures.excess([], [1.0])
    with pytest.raises(ValueError, match="steady"):
        figures.excess([(1, 1.0, 1.0)], [])


def test_window_duration_from_the_first_batch_start_or_a_given_start() -> None:
    window = [(5, 1_000.0, 101.0), (6, 500.0, 103.0)]
    assert figures.window_duration_s(window) == 3.0  # 100.0 -> 103.0
    assert figures.window_duration_s(window, started_at=95.5) == 7.5  # a prewarm began first


def test_the_throttle_arithmetic() -> None:
    # 11 files (a snapshot and ten deltas) of 15 MiB in all, 150 MiB/s and 20 ms per open
    assert figures.expected_read_s(15 * 2**20, 11, 150.0, 20.0) == pytest.approx(0.32)
    assert figures.expected_read_s(2**20, 1, 0.0, 20.0) == pytest.approx(0.02)  # unthrottled


def test_storage_settings() -> None:
    assert (
        figures.storage_conf("local", read_mb_per_s=1, open_latency_ms=1, log=None, jar=None) == {}
    )
    conf = figures.storage_conf(
        "throttled", read_mb_per_s=150.0, open_latency_ms=20.0, log=Path("/l"), jar="/j.jar"
    )
    assert conf["spark.hadoop.fs.throttled.impl"] == figures.THROTTLED_CLASS
    assert conf["spark.hadoop.fs.throttled.read.mb.per.s"] == "150.0"
    assert conf["spark.hadoop.fs.throttled.open.latency.ms"] == "20"
    assert conf["spark.hadoop.fs.throttled.log"] == "/l"
    assert conf["spark.executor.extraClassPath"] == conf["spark.driver.extraClassPath"] == "/j.jar"
    with pytest.raises(ValueError, match="jar"):
        figures.storage_conf("throttled", read_mb_per_s=1, open_latency_ms=1, log=None, jar=None)
    with pytest.raises(ValueError, match="storage"):
        figures.storage_conf("s3", read_mb_per_s=1, open_latency_ms=1, log=None, jar="j")
    assert figures.checkpoint_uri("throttled", Path("/tmp/x")) == "throttled:///tmp/x"
    assert figures.checkpoint_uri("local", Path("/tmp/x")) == "/tmp/x"


def test_the_read_log_is_summarised_by_file_kind_and_jvm_role() -> None:
    lines = [
        "100\t1000\tthrottled:/c/offsets/3\t200\t21000000\t20000000",
        "200\t2000\tthrottled:/c/state/0/5/7.delta\t1048576\t50000000\t28000000",
        "300\t2500\tthrottled:/c/state/0/6/10.snapshot\t2097152\t60000000\t33000000",
        "torn line",
        "300\t9000\tthrottled:/c/state/0/6/11.delta\t10\t1\t1",
    ]
    reads = figures.parse_reads(lines)
    assert len(reads) == 4
    summary = figures.summarise_reads(reads, driver_pid="100", between=(0.5, 3.0))
    assert summary["metadata_driver"] == {"opens": 1, "bytes": 200, "slept_s": 0.02}
    assert summary["state_executors"]["opens"] == 2
    assert summary["state_executors"]["bytes"] == 3 * 2**20
    assert summary["executor_pids"] == ["200", "300"]


def test_a_reload_reads_the_newest_snapshot_and_the_deltas_after_it(tmp_path: Path) -> None:
    files = {"9.delta": 5, "10.delta": 7, "10.snapshot": 100, "11.delta": 3, "12.delta": 4}
    assert figures.reload_bytes(files) == 107
    assert figures.reload_bytes({"1.delta": 5, "2.delta": 6}) == 11  # no snapshot yet
    for bin_id, size in ((0, 10), (1, 20), (2, 40)):
        folder = tmp_path / "state" / "0" / str(bin_id)
        folder.mkdir(parents=True)
        (folder / "1.delta").write_bytes(b"x" * size)
        (folder / ".1.delta.crc").write_bytes(b"c")
    assert figures.reload_bytes_on_disk(tmp_path, [0, 2, 9]) == 50


def test_the_sweep_rows_and_the_goal() -> None:
    full = {
        "max_batch_ms": 3_000.0,
        "excess_ms": 2_000.0,
        "steady_p50_ms": 1_000.0,
        "excess_over_steady": 2.0,
        "duration_s": 3.0,
        "moved_bins": 16,
        "moved_bytes": 10,
        "steps": 1,
    }
    part = {**full, "excess_ms": 300.0, "steps": 8}
    row = figures.sweep_row(
        320_000, {"all-at-once": full, "batched": part, "batched-prewarmed": None}
    )
    assert "steps" not in row["strategies"]["all-at-once"]
    assert row["strategies"]["batched-prewarmed"] is None
    goal = figures.bounded_ratio([row])
    assert goal["per_size"] == [
        {"keys": 320_000, "qualifies": True, "batched_over_all_at_once": 0.15}
    ]
    # all-at-once's excess against its own steady batches: under one, the size does not count
    slow = {**full, "steady_p50_ms": 2_500.0}
    row_slow = figures.sweep_row(320_000, {"all-at-once": slow, "batched": part})
    assert figures.bounded_ratio([row_slow])["per_size"][0]["qualifies"] is False
    assert figures.prewarm_ratio([row]) == {"goal": 0.5, "per_size": []}
    prewarmed = {**part, "excess_ms": 600.0, "steady_p50_ms": 1_200.0, "excess_over_steady": 0.5}
    row_pre = figures.sweep_row(80_000, {"all-at-once": full, "batched-prewarmed": prewarmed})
    assert figures.prewarm_ratio([row_pre])["per_size"] == [
        {"keys": 80_000, "excess_over_steady": 0.5}
    ]


def test_the_excess_in_steady_batches_is_over_its_own_baseline() -> None:
    spike = figures.excess([(5, 1_800.0, 0.0), (6, 2_400.0, 0.0)], [1_500.0, 1_600.0, 1_700.0])
    assert (spike.excess_ms, spike.excess_over_steady) == (800.0, 0.5)


def batches(first: int, durations: list[float]) -> list[figures.BatchTime]:
    return [(first + i, ms, float(first + i)) for i, ms in enumerate(durations)]


def test_runs_of_steady_batches_are_cut_at_a_missing_batch() -> None:
    assert figures.contiguous_runs([(3, 1.0, 0), (1, 5.0, 0), (2, 6.0, 0), (7, 9.0, 0)]) == [
        [5.0, 6.0, 1.0],
        [9.0],
    ]
    assert figures.contiguous_runs([]) == []


def test_the_steady_window_excess_is_the_worst_of_each_window_over_its_run_p50() -> None:
    run = batches(10, [100.0, 100.0, 400.0, 100.0, 100.0, 100.0, 100.0])  # p50 100, one slow
    one = figures.steady_window_excess([run], 1)
    assert one == {
        "median": 0.0,
        "max": 300.0,
        "window_batches": 1,
        "windows": 7,
        "steady_batches": 7,
    }
    # every window of 3 that holds batch 12 catches the slow batch: 3 of 5 windows
    three = figures.steady_window_excess([run], 3)
    assert (three["median"], three["max"], three["windows"]) == (300.0, 300.0, 5)
    # a window as long as the run: one window
    whole = figures.steady_window_excess([run], 7)
    assert (whole["median"], whole["windows"]) == (300.0, 1)
    assert "reason" not in whole


def test_a_window_longer_than_any_steady_run_gets_no_number_but_a_reason() -> None:
    runs = [batches(0, [100.0] * 6), batches(20, [100.0] * 6)]  # 12 batches, but in two runs
    out = figures.steady_window_excess(runs, 8)
    assert out["median"] is None and out["max"] is None
    assert out["windows"] == 0 and out["steady_batches"] == 12
    assert "6" in out["reason"] and "8" in out["reason"]
    assert figures.steady_window_excess([], 1)["reason"].startswith("the longest run")
    with pytest.raises(ValueError, match="one batch"):
        figures.steady_window_excess(runs, 0)


def test_steady_windows_never_span_a_gap_and_each_run_keeps_its_own_p50() -> None:
    # two runs at different levels: a window spanning both would see 1 000 over 100's p50
    low = batches(0, [100.0, 100.0, 100.0])
    high = batches(10, [1_000.0, 1_000.0, 1_000.0])
    out = figures.steady_window_excess([low + high], 2)
    assert (out["median"], out["max"], out["windows"]) == (0.0, 0.0, 4)


def test_the_moved_task_extra_is_the_moved_bins_time_above_their_batch() -> None:
    task_ms = {
        5: {0: 500.0, 1: 100.0, 2: 100.0, 3: 120.0},  # bin 0 moved in: 400 ms over the median
        6: {0: 100.0, 1: 300.0, 2: 100.0, 3: 110.0},  # bin 1 moved in: 200 over median 100
        7: {0: 400.0, 1: 400.0, 2: 400.0, 3: 400.0},  # a slow batch of the query, no move
    }
    out = figures.moved_task_extra(task_ms, {5: [0], 6: [1]})
    assert out["per_batch"] == {5: 400.0, 6: 200.0}
    assert (out["max"], out["sum"], out["moved_tasks"]) == (400.0, 600.0, 2)
    assert "reason" not in out and "unread_batches" not in out
    # a batch where every task is slow, moved-in or not, costs the migration nothing
    slow = figures.moved_task_extra(task_ms, {7: [2, 3]})
    assert (slow["max"], slow["sum"]) == (0.0, 0.0)
    # moved-in bins faster than the rest give a negative extra, not clipped
    assert figures.moved_task_extra({1: {0: 50.0, 1: 100.0}}, {1: [0]})["max"] == -50.0


def test_the_moved_task_extra_of_nothing_moved_is_zero() -> None:
    out = figures.moved_task_extra({5: {0: 100.0}}, {})
    assert (out["max"], out["sum"], out["moved_tasks"], out["per_batch"]) == (0.0, 0.0, 0, {})
    assert figures.moved_task_extra({}, {5: []})["max"] == 0.0


def test_the_moved_task_extra_lists_batches_it_cannot_read() -> None:
    task_ms = {5: {0: 500.0, 1: 100.0}, 6: {0: 100.0, 1: 100.0}}
    # batch 8 has no task list; in batch 6 every bin moved in: no other bin to compare with
    partial = figures.moved_task_extra(task_ms, {5: [0], 6: [0, 1], 8: [1]})
    assert (partial["max"], partial["sum"]) == (400.0, 400.0)
    assert partial["unread_batches"] == [6, 8]
    none = figures.moved_task_extra(task_ms, {6: [0, 1], 8: [1]})
    assert none["max"] is None and none["sum"] is None
    assert "no batch" in none["reason"]


def test_the_sweep_rows_carry_the_diagnostics_and_the_text_shows_them() -> None:
    steady = {"median": 250.0, "max": 900.0, "window_batches": 16, "windows": 9}
    extra = {"max": 1_400.0, "sum": 9_000.0, "moved_tasks": 32, "per_batch": {}}
    result = {
        "max_batch_ms": 4_900.0,
        "excess_ms": 2_500.0,
        "steady_window_excess_ms": steady,
        "moved_task_extra_ms": extra,
    }
    row = figures.sweep_row(640_000, {"batched": result})
    assert row["strategies"]["batched"]["steady_window_excess_ms"] == steady
    assert row["strategies"]["batched"]["moved_task_extra_ms"] == extra
    unknown = {"median": None, "max": None, "window_batches": 32, "reason": "too few"}
    lines = figures.noise_lines(
        {
            "batched": result,
            "fluid": {**result, "steady_window_excess_ms": unknown},
            "batched-prewarmed": None,
        }
    )
    assert lines[0] == (
        "batched: excess 2500 ms; without migration over 16 batches: median 250 ms, "
        "max 900 ms; moved-in task extra: max 1400 ms per batch, 9000 ms in all"
    )
    assert "over 32 batches: n/a (too few)" in lines[1]
    assert lines[2] == "batched-prewarmed: not run"


def test_the_excess_plot_draws_the_no_migration_medians(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from swivel_tools.bench.migration_plots import plot_excess

    def result(excess: float, median: float | None) -> dict[str, object]:
        steady = {"median": median, "max": median, "window_batches": 16}
        return {"moved_bytes": 2**20, "excess_ms": excess, "steady_window_excess_ms": steady}

    sweep = [{"strategies": {"batched": result(2_500.0, 250.0), "fluid": result(1.0, None)}}]
    path = plot_excess(sweep, tmp_path)
    assert path is not None and Path(path).stat().st_size > 0
