"""Drizzle's AIMD rule (Venkataraman et al., SOSP 2017, §3.4), pure.

Drizzle schedules a *group* of micro-batches at once and coordinates (reschedules, adapts
to failures and new machines) only at group boundaries. A bigger group amortises the
coordination cost over more batches; a smaller one reacts sooner. Drizzle picks the
smallest group whose coordination overhead -- coordination time over total time, measured
with counters during a group and exponentially averaged -- stays within user bounds, like
TCP congestion control: above the upper bound the group grows *multiplicatively* (the
overhead falls fast); below the lower bound it shrinks *additively* (adaptivity returns
gently). `adjust` is that rule, once, for both of Swivel's uses:

- **The group size g of Swivel's own per-batch coordination** (`GroupConfig`, `GroupState`,
  `step_group`, `group_in_force`). Group scheduling of Spark's *tasks* needs Spark's
  scheduler and cannot be done from PySpark; what Swivel can group is the coordination it
  adds to every micro-batch on the driver (the batch-end report to the agent, the
  migration driver's boundary hook). The driver (`swivel.jobs.runtime.grouping`) runs
  it every g batches, measures the wall time it spends in it per batch against the
  batches' own time, and steps g here at each group's end. Swivel's rule on top of
  Drizzle's, not Drizzle's: while reconfiguration work is pending (a plan in flight, a
  pinned replay, a bin migration) every batch is a coordination point (g = 1), so a
  reconfiguration never waits for a group to end; the AIMD state is left as it was and
  takes over again once nothing is pending.
- **The operator's `aimd` policy on the loads interval** (`AimdConfig`, `AimdState`,
  `step`): seconds between two load measurements of the driver. That is a period, not a
  group of batches: it changes no per-batch work (docs/benchmarks.md, "Drizzle").

Everything is pure: a measurement and the previous state go in, the next state comes
out. Measuring time is the caller's job (`overhead` only divides).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def adjust(  # noqa: PLR0917 - the rule's inputs, named at every call
    value: float,
    smoothed_overhead: float,
    lower: float,
    upper: float,
    increase_factor: float,
    decrease_step: float,
) -> float:
    """Drizzle §3.4: multiply `value` by `increase_factor` when the smoothed overhead is
    above `upper`, subtract `decrease_step` when it is below `lower`, hold it in between.
    The caller clamps."""
    if smoothed_overhead > upper:
        return value * increase_factor
    if smoothed_overhead < lower:
        return value - decrease_step
    return value


@dataclass(frozen=True, slots=True)
class AimdConfig:
    """The loads interval's bounds and steps (the operator's `aimd` policy). Defaults follow Drizzle's experiment (overhead kept within 5-10 %,
    §5.5.3) and a micro-batch trigger of about a second.

    - `increase_factor` 2: doubling, as TCP and Drizzle do, halves the overhead per step.
    - `decrease_step` 0.5 s: about one micro-batch less between measurements per step.
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


def smooth(previous: float | None, measured: float, smoothing: float) -> float:
    """Exponentially weighted moving average of the overhead (`smoothing`: the newest
    measurement's weight)."""
    if previous is None:
        return measured
    return smoothing * measured + (1 - smoothing) * previous


def step(state: AimdState, measured_overhead: float, config: AimdConfig) -> AimdState:
    """One AIMD step: smooth the measurement, then grow the interval multiplicatively above
    the band, shrink it additively below it, hold it inside; always within the bounds."""
    if not 0 <= measured_overhead <= 1:
        raise ValueError(f"overhead is a fraction in [0, 1], got {measured_overhead}")
    smoothed = smooth(state.smoothed_overhead, measured_overhead, config.smoothing)
    interval = adjust(
        state.interval_s,
        smoothed,
        config.lower_overhead,
        config.upper_overhead,
        config.increase_factor,
        config.decrease_step,
    )
    return AimdState(config.clamp(interval), smoothed)


# -- the group size of Swivel's per-batch coordination ---------------------------------------


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Bounds and steps for g, the batches per coordination point of the driver.

    - `lower_overhead` 1 % / `upper_overhead` 2 %: Drizzle kept its *scheduling* overhead
      within 5-10 % (§5.5.3); Swivel's coordination comes on top of Spark's own, inside a
      runtime overhead budget of 10 % in all (docs/benchmarks.md), so its band is tighter.
    - `increase_factor` 2, `decrease_step` 1: Drizzle's (and TCP's) doubling, one batch less.
    - `max_group` 16: the agent's view of completed batches (status, metrics, the loads'
      window) lags at most this many batches; pending work never waits for a group.
    - `smoothing` 0.3: the newest group's weight in the exponential average, so one GC pause
      (Drizzle's "transient latency spikes") does not double g on its own.
    """

    lower_overhead: float = 0.01
    upper_overhead: float = 0.02
    increase_factor: int = 2
    decrease_step: int = 1
    max_group: int = 16
    smoothing: float = 0.3

    def __post_init__(self) -> None:
        if not 0 <= self.lower_overhead < self.upper_overhead <= 1:
            raise ValueError("need 0 <= lower_overhead < upper_overhead <= 1")
        if self.increase_factor < 2 or self.decrease_step < 1 or self.max_group < 1:
            raise ValueError("need increase_factor >= 2, decrease_step >= 1, max_group >= 1")
        if not 0 < self.smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")

    def clamp(self, group: int) -> int:
        return min(self.max_group, max(1, group))


@dataclass(frozen=True, slots=True)
class GroupState:
    """The group size until the next step, and the smoothed overhead so far (None before
    the first measurement, which then seeds the average on its own)."""

    group: int = 1
    smoothed_overhead: float | None = None


def step_group(state: GroupState, measured_overhead: float, config: GroupConfig) -> GroupState:
    """One AIMD step at a group's end on the overhead measured over that group."""
    if not 0 <= measured_overhead <= 1:
        raise ValueError(f"overhead is a fraction in [0, 1], got {measured_overhead}")
    smoothed = smooth(state.smoothed_overhead, measured_overhead, config.smoothing)
    group = adjust(
        state.group,
        smoothed,
        config.lower_overhead,
        config.upper_overhead,
        config.increase_factor,
        config.decrease_step,
    )
    return GroupState(config.clamp(int(group)), smoothed)


def group_in_force(state: GroupState, *, pending: bool) -> int:
    """The batches until the next coordination point: 1 while reconfiguration work is
    pending (Swivel's rule, see the module docstring), else AIMD's g."""
    return 1 if pending else state.group
