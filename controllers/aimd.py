"""Drizzle's AIMD controller (Venkataraman et al., SOSP 2017, §3.4) for Swivel's
coordination interval.

Drizzle schedules a *group* of micro-batches at once and coordinates (reschedules, adapts
to failures and new machines) only at group boundaries. A bigger group amortises the
coordination cost over more batches; a smaller one reacts sooner. Drizzle picks the
smallest group whose coordination overhead -- coordination time over total time -- stays
within user bounds, like TCP congestion control: when the smoothed overhead rises above
the upper bound the group grows *multiplicatively* (overhead falls fast); when it drops
below the lower bound the group shrinks *additively* (adaptivity returns gently).

How that maps onto Swivel. Spark schedules every micro-batch itself, so Swivel cannot
pre-schedule a group; what it controls is how often it stops at a micro-batch boundary
to coordinate -- pull plans from the agent, push metrics, check for bin moves and
pending reconfigurations. Drizzle's group size *g* becomes the number of micro-batches
between two such coordination points, and this controller works on the equivalent
*coordination interval* g x trigger interval, in seconds, so the bounds and steps stay
meaningful when the trigger interval changes; `batches_per_coordination` converts back.
Smaller interval = reconfigurations land sooner; larger = less time lost at boundaries.

Everything is pure: a measurement and the previous state go in, the next state comes
out. Measuring time is the caller's job (`overhead` only divides).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AimdConfig:
    """Bounds and steps. Defaults follow Drizzle's experiment (overhead kept within 5-10 %,
    §5.5.3) and a micro-batch trigger of about a second.

    - `increase_factor` 2: doubling, as TCP and Drizzle do, halves the overhead per step.
    - `decrease_step` 0.5 s: about one micro-batch less between coordinations per step.
    - `min_interval_s` 0.5 / `max_interval_s` 60: never coordinate more often than the
      trigger can fire, never so rarely that a reconfiguration waits over a minute.
    - `smoothing` 0.3: weight of the newest measurement in the exponential average, so a
      single GC pause or slow boundary (Drizzle's "transient latency spikes") does not
      double the interval on its own.
    """

    lower_overhead: float = 0.05
    upper_overhead: float = 0.10
    increase_factor: float = 2.0
    decrease_step: float = 0.5
    min_interval_s: float = 0.5
    max_interval_s: float = 60.0
    smoothing: float = 0.3

    def __post_init__(self) -> None:
        if not 0 <= self.lower_overhead < self.upper_overhead <= 1:
            raise ValueError("need 0 <= lower_overhead < upper_overhead <= 1")
        if not self.increase_factor > 1:
            raise ValueError("increase_factor must be above 1")
        if not self.decrease_step > 0:
            raise ValueError("decrease_step must be positive")
        if not 0 < self.min_interval_s <= self.max_interval_s < math.inf:
            raise ValueError("need 0 < min_interval_s <= max_interval_s < inf")
        if not 0 < self.smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")

    def clamp(self, interval_s: float) -> float:
        return min(self.max_interval_s, max(self.min_interval_s, interval_s))


@dataclass(frozen=True, slots=True)
class AimdState:
    """The interval to use until the next measurement, and the smoothed overhead so far
    (None before the first measurement, which then seeds the average on its own)."""

    interval_s: float
    smoothed_overhead: float | None = None

    @classmethod
    def start(cls, config: AimdConfig, interval_s: float | None = None) -> AimdState:
        """Start at `interval_s`, or at the minimum: Drizzle starts small (group size 2)
        and lets the overhead push the interval up."""
        return cls(config.clamp(config.min_interval_s if interval_s is None else interval_s))


def overhead(coordination_s: float, processing_s: float) -> float:
    """Drizzle's scheduling overhead: the fraction of the elapsed time spent coordinating.
    Zero when nothing was measured, so an idle period never grows the interval."""
    if coordination_s < 0 or processing_s < 0:
        raise ValueError("durations must not be negative")
    total = coordination_s + processing_s
    return 0.0 if total == 0 else coordination_s / total


def smooth(previous: float | None, measured: float, config: AimdConfig) -> float:
    """Exponentially weighted moving average of the overhead."""
    if previous is None:
        return measured
    return config.smoothing * measured + (1 - config.smoothing) * previous


def step(state: AimdState, measured_overhead: float, config: AimdConfig) -> AimdState:
    """One AIMD step: smooth the measurement, then grow the interval multiplicatively above
    the band, shrink it additively below it, hold it inside; always within the bounds."""
    if not 0 <= measured_overhead <= 1:
        raise ValueError(f"overhead is a fraction in [0, 1], got {measured_overhead}")
    smoothed = smooth(state.smoothed_overhead, measured_overhead, config)
    interval = state.interval_s
    if smoothed > config.upper_overhead:
        interval *= config.increase_factor
    elif smoothed < config.lower_overhead:
        interval -= config.decrease_step
    return AimdState(config.clamp(interval), smoothed)


def batches_per_coordination(interval_s: float, trigger_interval_s: float) -> int:
    """Drizzle's group size: how many micro-batches run between coordination points.
    Rounded to the nearest whole batch, and at least one (every boundary)."""
    if not trigger_interval_s > 0:
        raise ValueError("trigger_interval_s must be positive")
    return max(1, round(interval_s / trigger_interval_s))
