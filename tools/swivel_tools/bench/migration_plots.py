"""PNGs of `swivel bench migration`: the latency timeline per strategy (Megaphone Fig. 1)
and the excess latency against the moved state over the size sweep (its scaling figure:
all-at-once's spike grows with the state moved, batched's stays bounded)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swivel_tools.bench.migration_figures import BatchTime


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_timelines(
    timelines: Mapping[str, Sequence[BatchTime]],
    steady_ms: float,
    folder: Path,
    windows: Mapping[str, tuple[int, int]] | None = None,
) -> list[str]:
    """One PNG per strategy: batch duration against completion time, the migration's
    batches shaded, the steady p50 dashed."""
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    top = max((d for points in timelines.values() for _, d, _ in points), default=1.0)
    for strategy, points in timelines.items():
        if not points:
            continue
        t0 = points[0][2]
        figure, axes = plt.subplots(figsize=(6, 3))
        axes.plot([p[2] - t0 for p in points], [p[1] for p in points], marker="o")
        axes.axhline(steady_ms, linestyle="--", color="grey", label="steady p50")
        first, last = (windows or {}).get(strategy, (-1, -1))
        moving = [p for p in points if first <= p[0] <= last]
        if moving:  # from the start of the first migration batch to the end of the last
            start = min(p[2] - p[1] / 1e3 for p in moving) - t0
            axes.axvspan(start, max(p[2] for p in moving) - t0, alpha=0.15, label="migration")
        axes.set_ylim(0, top * 1.1)
        axes.set_xlabel("time (s)")
        axes.set_ylabel("batch duration (ms)")
        axes.set_title(f"bin migration: {strategy}")
        axes.legend()
        figure.tight_layout()
        path = folder / f"migration-{strategy}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(str(path))
    return paths


def plot_excess(sweep: Sequence[Mapping[str, Any]], folder: Path) -> str | None:
    """Excess latency (worst migration batch - steady p50) against the moved state's bytes,
    one line per strategy over the sweep's sizes; dotted in the same colour, the median
    excess the query shows with no migration over a window as long as the strategy's
    (`steady_window_excess_ms`): a strategy's excess near its dotted line is the query's
    own slow batches, not the migration."""
    lines: dict[str, list[tuple[float, float]]] = {}
    noise: dict[str, list[tuple[float, float]]] = {}
    for row in sweep:
        for name, result in row["strategies"].items():
            if result is not None:
                moved_mib = result["moved_bytes"] / 2**20
                lines.setdefault(name, []).append((moved_mib, result["excess_ms"]))
                steady = result.get("steady_window_excess_ms") or {}
                if steady.get("median") is not None:
                    noise.setdefault(name, []).append((moved_mib, steady["median"]))
    if not lines:
        return None
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, points in sorted(lines.items()):
        points.sort()
        (line,) = axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        quiet = sorted(noise.get(name, []))
        if quiet:
            axes.plot(
                [p[0] for p in quiet],
                [p[1] for p in quiet],
                linestyle=":",
                marker=".",
                color=line.get_color(),
                label=f"{name}: no migration, same window (median)",
            )
    axes.axhline(0, color="grey", linewidth=0.5)
    axes.set_xlabel("moved state (MiB, attributed in-memory bytes)")
    axes.set_ylabel("excess latency (ms)")
    axes.set_title("worst migration batch - steady p50")
    axes.legend(fontsize="small")
    figure.tight_layout()
    path = folder / "migration-excess.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return str(path)
