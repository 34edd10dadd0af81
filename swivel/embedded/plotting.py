"""The latency timeline PNG (after Fries Fig. 13): end-to-end latency of every output row
over time, with each reconfiguration's request and completion marked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLOURS = {"fries": "tab:green", "epoch": "tab:orange", "restart": "tab:red", "naive": "tab:purple"}


def plot_timeline(
    rows: Any, events: Sequence[tuple[str, float, float]], started_at: float, path: Path
) -> Path:
    """`rows`: pandas with `emitted_at` and `latency_s`; `events`: (scheduler, requested,
    completed) per reconfiguration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 4.5))
    if len(rows):
        axes.scatter(rows["emitted_at"] - started_at, rows["latency_s"], s=2, c="tab:blue",
                     alpha=0.4, label="output rows")  # fmt: skip
    for scheduler, requested, completed in events:
        colour = COLOURS.get(scheduler, "black")
        axes.axvspan(requested - started_at, completed - started_at, color=colour, alpha=0.25)
        axes.axvline(requested - started_at, color=colour, linewidth=1, label=f"swap ({scheduler})")
    axes.set_xlabel("time since the surge began (s)")
    axes.set_ylabel("end-to-end latency (s)")
    axes.set_title("Fraud detection under a surge: hot-swapping the model (shaded: until switched)")
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=False))
    axes.legend(unique.values(), unique.keys(), loc="upper left", fontsize="small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
