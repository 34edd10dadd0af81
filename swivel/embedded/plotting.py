"""The demo's PNGs (after Fries Fig. 13): end-to-end latency of every output row over time,
with each reconfiguration's request and completion marked (`plot_timeline`), and the swaps
side by side, each on its own row with time 0 at its request (`plot_aligned`), so how long
each scheduler took to put the new version in effect is seen at a glance."""

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


WINDOW_S = (-6.0, 14.0)  # around each request


def plot_aligned(rows: Any, swaps: Sequence[tuple[str, float, float | None]], path: Path) -> Path:
    """`rows`: pandas with `emitted_at`, `latency_s` and `customer_model`; `swaps`:
    (scheduler, requested, in effect) per reconfiguration, all epoch seconds. One row of the
    figure per swap, on one time axis: seconds since that swap's request."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = max(len(swaps), 1)
    effects = [e - r for _, r, e in swaps if e is not None]
    window = (WINDOW_S[0], max(WINDOW_S[1], max(effects, default=0.0) + 4.0))
    figure, axes_list = plt.subplots(count, 1, figsize=(10, 1.9 * count + 1.0), sharex=True,
                                     squeeze=False)  # fmt: skip
    for axes, (scheduler, requested, in_effect) in zip(axes_list[:, 0], swaps, strict=False):
        colour = COLOURS.get(scheduler, "black")
        if len(rows):
            near = rows[(rows["emitted_at"] >= requested + window[0])
                        & (rows["emitted_at"] <= requested + window[1])]  # fmt: skip
            cheap = near["customer_model"] == "cheap"
            for mask, label, dot in ((~cheap, "old model", "tab:grey"),
                                     (cheap, "new model", "tab:green")):  # fmt: skip
                part = near[mask]
                axes.scatter(part["emitted_at"] - requested, part["latency_s"], s=3, c=dot,
                             alpha=0.5, label=label)  # fmt: skip
        axes.axvline(0.0, color="black", linewidth=1)
        title = f"{scheduler}: no in-effect moment recorded"
        if in_effect is not None:
            effect_s = in_effect - requested
            axes.axvspan(0.0, effect_s, color=colour, alpha=0.3)
            axes.axvline(effect_s, color=colour, linewidth=1.5)
            title = (
                f"{scheduler}: new version in effect {effect_s * 1000:,.0f} ms after the request"
            )
        axes.set_title(title, fontsize=9, loc="left")
        axes.set_ylabel("latency (s)", fontsize=8)
        axes.set_xlim(*window)
    axes_list[0, 0].legend(loc="upper right", fontsize="small", markerscale=3)
    axes_list[-1, 0].set_xlabel("seconds since the swap was requested (shaded: until in effect)")
    figure.suptitle("The same swap under each scheduler, aligned at its request", fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
