"""`swivel bench migration`'s options reach the bench's settings and its text output puts
the goal's excess beside its two diagnostics (the run itself is faked: no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from swivel_tools.bench import migration as bench
from swivel_tools.cli.bench_migration import migration


def test_the_steady_run_option_and_the_text_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[bench.BenchConfig] = []
    steady = {"median": 250.0, "max": 900.0, "window_batches": 16}
    extra = {"max": 1_400.0, "sum": 9_000.0}

    def run(config: bench.BenchConfig, **_: Any) -> dict[str, Any]:
        seen.append(config)
        result = {
            "excess_ms": 2_500.0,
            "steady_window_excess_ms": steady,
            "moved_task_extra_ms": extra,
        }
        return {
            "steady_batch_ms": {"p50": 2_400.0, "keys": 640_000},
            "strategies": {"batched": result},
        }

    monkeypatch.setattr(bench, "run_migration_bench", run)
    runner = CliRunner()
    out = runner.invoke(migration, ["--steady-run-batches", "0", "--plots", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert seen[-1].steady_run_batches == 0
    assert "at 640000 keys" in out.output
    assert "batched: excess 2500 ms; without migration over 16 batches: median 250 ms" in out.output
    assert runner.invoke(migration, ["--plots", str(tmp_path)]).exit_code == 0
    assert seen[-1].steady_run_batches is None  # the default: the longest window + a margin
    refused = runner.invoke(migration, ["--steady-run-batches", "-1"])
    assert refused.exit_code != 0


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[bench.BenchConfig]:
    """The settings each `swivel bench migration` call ran with (the run itself faked)."""
    configs: list[bench.BenchConfig] = []

    def run(config: bench.BenchConfig, **_: Any) -> dict[str, Any]:
        configs.append(config)
        return {"steady_batch_ms": {"p50": 2_000.0, "keys": 160_000}, "strategies": {}}

    monkeypatch.setattr(bench, "run_migration_bench", run)
    return configs


def test_the_trigger_and_the_slots_reach_the_settings_and_a_negative_trigger_is_refused(
    seen: list[bench.BenchConfig], tmp_path: Path
) -> None:
    runner = CliRunner()
    assert runner.invoke(migration, ["--plots", str(tmp_path)]).exit_code == 0
    assert (seen[-1].trigger_ms, seen[-1].executor_cores) == (0, 1)  # back to back, 1 slot
    out = runner.invoke(migration, ["--trigger-ms", "3000", "--plots", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert seen[-1].trigger_ms == 3000
    refused = runner.invoke(migration, ["--trigger-ms", "-1", "--plots", str(tmp_path)])
    assert refused.exit_code == 2 and "--trigger-ms" in refused.output, refused.output
    assert len(seen) == 2  # nothing ran for the refused value


def test_the_source_log_compaction_interval_reaches_the_session(
    seen: list[bench.BenchConfig], tmp_path: Path
) -> None:
    from swivel_tools.bench.migration_settings import migration_conf

    runner = CliRunner()
    assert runner.invoke(migration, ["--plots", str(tmp_path)]).exit_code == 0
    key = "spark.sql.streaming.fileSource.log.compactInterval"
    assert migration_conf(seen[-1])[key] == "10"  # Spark's default unless asked
    asked = ["--source-log-compact-interval", "100000", "--plots", str(tmp_path)]
    assert runner.invoke(migration, asked).exit_code == 0
    assert migration_conf(seen[-1])[key] == "100000"
    refused = runner.invoke(migration, ["--source-log-compact-interval", "0"])
    assert refused.exit_code == 2 and "--source-log-compact-interval" in refused.output


def test_old_versions_are_deleted_in_batches_matched_to_the_snapshot_interval(
    seen: list[bench.BenchConfig], tmp_path: Path
) -> None:
    """Spark's maintenance lists a bin's folder only once `minBatchesToRetain x ratio`
    versions have gathered; with a raised snapshot interval the bench raises the ratio to
    two intervals (a listing then finds a snapshot to delete), unless asked for Spark's."""
    from swivel_tools.bench.migration_settings import migration_conf

    runner = CliRunner()
    key = "spark.sql.streaming.ratioExtraSpaceAllowedInCheckpoint"
    assert runner.invoke(migration, ["--plots", str(tmp_path)]).exit_code == 0
    assert migration_conf(seen[-1])[key] == "0.3"  # Spark's default fits a snapshot every 10
    raised = ["--snapshot-every", "50", "--plots", str(tmp_path)]
    assert runner.invoke(migration, raised).exit_code == 0
    assert migration_conf(seen[-1])[key] == "1"  # 100 versions: two intervals of 50
    spark = [*raised, "--spark-cleanup-ratio"]
    assert runner.invoke(migration, spark).exit_code == 0
    assert migration_conf(seen[-1])[key] == "0.3"
