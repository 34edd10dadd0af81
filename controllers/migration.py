"""Megaphone migration plans: how to get from one bin placement to another, step by step.

Megaphone (§3.3) drives a migration by revealing configuration updates over time; a
strategy is the order and grouping in which the changed bins are revealed. In Spark a step
is one micro-batch boundary: the driver re-points the bins of the step and the next batch
runs them on their new executors, which reload them from the checkpoint. So a step costs
roughly the slowest reload *on one executor*, and the plan trades batches (duration)
against bins per batch (latency spike):

- all-at-once: every changed bin in one step (shortest, the biggest spike);
- fluid: one bin per step (smallest spike, longest);
- batched: `batch_size` bins per step (Megaphone's batches), in `ceil(moves / batch_size)`
  steps, the moves of a step spread over as many executors as the moves allow.

The spreading is §4.4's grouping of non-interfering moves: edge-colour the bipartite
multigraph senders -> receivers (one edge per move); a colour class is a matching, a
group in which each executor sends at most one bin and receives at most one, so no
executor reloads two bins in one batch. König's theorem says max degree Δ colours suffice
and are needed; `edge_colouring.EdgeColouring` finds such a colouring with the textbook
alternating-path argument and evens the class sizes (de Werra). `non_interfering_steps`
returns those groups (the fewest steps whose spike is a single bin per executor); the
batched plan cuts the groups, in order, into steps of `batch_size`, so a step spans as
few groups as possible and no executor reloads more bins than the batch size forces.

`gap_batches` empty steps go between move steps: the system drains the records queued
during one migration step before the next one starts, instead of during it (§4.4).

The order of the steps, and of the hand-overs inside each, is read off the meta-topology
G' (`handover.py`): its state edges, several givers in parallel, least-loaded taker first,
so a swap moves one bin each way per step instead of one direction after the other (no
wave order: in Spark no bin is handed on within a plan). A step is a list of hand-overs
(giver -> taker, bins); the migration executor re-points them in exactly that order and
never plans itself. The plan names the placement it assumes (`initial`): an executor that
finds another one refuses the plan instead of carrying out moves meant for a placement
that is gone.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .assignments import Assignment, validate_same_bins
from .edge_colouring import EdgeColouring, max_degree
from .errors import PlanningError
from .handover import (
    HandOver,
    hand_overs_in_order,
    initial_loads,
    one_at_a_time,
    order_groups,
)
from .metatopology import plan_meta_topology


class Strategy(enum.StrEnum):
    ALL_AT_ONCE = "all-at-once"
    FLUID = "fluid"
    BATCHED = "batched"


class MigrationError(PlanningError):
    """Plan parameters that make no sense. `field` names the parameter."""


@dataclass(frozen=True, slots=True)
class Move:
    """Bin `bin` leaves `source` and is served by `target` from the next batch on."""

    bin: int
    source: str
    target: str


@dataclass(frozen=True, slots=True)
class Step:
    """The moves made at one micro-batch boundary. No moves: a gap (a batch to catch up)."""

    moves: tuple[Move, ...] = ()

    @property
    def is_gap(self) -> bool:
        return not self.moves

    @property
    def hand_overs(self) -> tuple[HandOver, ...]:
        """The moves as hand-overs (giver -> taker, bins), in the order they are made."""
        found: list[HandOver] = []
        for move in self.moves:
            last = found[-1] if found else None
            if last is not None and (last.giver, last.taker) == (move.source, move.target):
                found[-1] = HandOver(last.giver, last.taker, (*last.bins, move.bin))
            else:
                found.append(HandOver(move.source, move.target, (move.bin,)))
        return tuple(found)


@dataclass(frozen=True)
class MigrationPlan:
    """A strategy's steps from `initial` (bin `b` is on `initial[b]`) to the target."""

    strategy: Strategy
    initial: tuple[str, ...]
    steps: tuple[Step, ...]

    @property
    def moves(self) -> tuple[Move, ...]:
        return tuple(move for step in self.steps for move in step.moves)

    @property
    def moved_bins(self) -> tuple[int, ...]:
        return tuple(sorted(move.bin for move in self.moves))

    @property
    def step_count(self) -> int:
        """Micro-batch boundaries the plan spans, gap steps included."""
        return len(self.steps)

    @property
    def move_step_count(self) -> int:
        return sum(1 for step in self.steps if not step.is_gap)

    @property
    def max_moves_per_step(self) -> int:
        return max((len(step.moves) for step in self.steps), default=0)

    @property
    def before(self) -> dict[int, str]:
        return dict(enumerate(self.initial))

    @property
    def after(self) -> dict[int, str]:
        return self.before if not self.steps else self.assignment_after(len(self.steps) - 1)

    def assignment_after(self, step_index: int) -> dict[int, str]:
        """The placement once steps `0..step_index` have been applied."""
        if not 0 <= step_index < len(self.steps):
            raise IndexError(f"step {step_index} is not in 0..{len(self.steps) - 1}")
        placement = self.before
        for step in self.steps[: step_index + 1]:
            for move in step.moves:
                placement[move.bin] = move.target
        return placement

    def assignments(self) -> Iterator[dict[int, str]]:
        """The placement after each step, in order (for checking and for display)."""
        placement = self.before
        for step in self.steps:
            for move in step.moves:
                placement[move.bin] = move.target
            yield dict(placement)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form for `swivel plan`, a Reconfiguration's status and the driver
        action that carries the plan out (`from_dict`). `initial[b]`: the executor the plan
        assumes serves bin `b`."""
        return {
            "strategy": str(self.strategy),
            "stepCount": self.step_count,
            "movedBins": list(self.moved_bins),
            "initial": list(self.initial),
            "steps": [
                {"handOver": [h.to_dict() for h in s.hand_overs]} if s.moves else {"gap": True}
                for s in self.steps
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MigrationPlan:
        """The plan `to_dict` wrote, steps and order as they were (no planning)."""
        try:
            steps = tuple(
                Step(
                    tuple(
                        Move(int(b), str(h["from"]), str(h["to"]))
                        for h in step.get("handOver", ())
                        for b in h["bins"]
                    )
                )
                for step in data["steps"]
            )
            return cls(
                _parse_strategy(str(data["strategy"])),
                tuple(str(e) for e in data["initial"]),
                steps,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise MigrationError("plan", f"not a migration plan: {error!r}") from None


def plan_migration(
    current: Assignment,
    target: Assignment,
    strategy: Strategy | str,
    *,
    batch_size: int = 4,
    gap_batches: int = 0,
) -> MigrationPlan:
    """Plan the moves from `current` to `target`; bins that keep their executor never move.

    Deterministic: the same inputs give the same plan. `batch_size` only matters for the
    batched strategy; `gap_batches` empty steps separate consecutive move steps.
    """
    validate_same_bins(current, target)
    chosen = _parse_strategy(strategy)
    _check_batch_size(batch_size)
    if gap_batches < 0:
        raise MigrationError("gap_batches", f"must not be negative, got {gap_batches}")
    ordered = _hand_over_steps(current, target, chosen, batch_size)
    steps = _with_gaps([Step(_moves(hand_overs)) for hand_overs in ordered], gap_batches)
    initial = tuple(current[b] for b in range(len(current)))
    return MigrationPlan(chosen, initial, tuple(steps))


def _hand_over_steps(
    current: Assignment, target: Assignment, strategy: Strategy, batch_size: int
) -> list[list[HandOver]]:
    """The steps in hand-over order over the moving state edges of G' (`handover.py`)."""
    loads = initial_loads(current)
    edges = [
        (edge.source.executor, edge.target.executor, edge.bins)
        for edge in plan_meta_topology(current, target).state_edges
        if edge.is_move
    ]
    if strategy is Strategy.ALL_AT_ONCE:  # one boundary: the order is only listed
        everything = hand_overs_in_order(edges, loads)
        return [everything] if everything else []
    if strategy is Strategy.FLUID:
        return [[h] for h in one_at_a_time(edges, loads)]
    moves = [Move(b, giver, taker) for giver, taker, bins in edges for b in bins]
    groups = _batched_groups(moves, batch_size)
    return order_groups([[(m.bin, m.source, m.target) for m in g] for g in groups], loads)


def _moves(hand_overs: Sequence[HandOver]) -> tuple[Move, ...]:
    return tuple(Move(b, h.giver, h.taker) for h in hand_overs for b in h.bins)


def non_interfering_steps(moves: Sequence[Move], batch_size: int | None = None) -> list[list[Move]]:
    """Group moves into the fewest steps in which no executor sends or receives twice and
    no step holds more than `batch_size` moves (unbounded when None). Each step is sorted
    by bin and the steps by their first bin, so the grouping is deterministic."""
    if batch_size is not None:
        _check_batch_size(batch_size)
    if not moves:
        return []
    limit = len(moves) if batch_size is None else batch_size
    colouring = EdgeColouring(moves, max(max_degree(moves), math.ceil(len(moves) / limit)))
    colouring.colour_all()
    colouring.balance()
    groups = [sorted(group, key=lambda m: m.bin) for group in colouring.classes() if group]
    return sorted(groups, key=lambda group: group[0].bin)


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise MigrationError("batch_size", f"must be at least 1, got {batch_size}")


def _parse_strategy(strategy: Strategy | str) -> Strategy:
    try:
        return Strategy(strategy)
    except ValueError:
        choices = ", ".join(s.value for s in Strategy)
        raise MigrationError("strategy", f"{strategy!r} is not one of {choices}") from None


def _batched_groups(moves: list[Move], batch_size: int) -> list[list[Move]]:
    if not moves:
        return []
    spread = [move for group in _givers_in_turn(_balanced_groups(moves)) for move in group]
    return _even_chunks(spread, math.ceil(len(spread) / batch_size))


def _givers_in_turn(groups: list[list[Move]]) -> list[list[Move]]:
    """The groups with their givers taking turns (round robin over the groups' sets of
    givers), so consecutive groups -- one step -- come from several givers in parallel
    rather than one giver after another (Chi's scale-out: R1 and R2 both hand to R3)."""
    by_givers: dict[tuple[str, ...], list[list[Move]]] = {}
    for group in groups:
        by_givers.setdefault(tuple(sorted({m.source for m in group})), []).append(group)
    queues = list(by_givers.values())
    turns = [
        queue[i]
        for i in range(max(map(len, queues), default=0))
        for queue in queues
        if i < len(queue)
    ]
    return turns


def _balanced_groups(moves: list[Move]) -> list[list[Move]]:
    """Δ non-interfering groups of near-equal size, so a step of k moves spans few groups."""
    return non_interfering_steps(moves, math.ceil(len(moves) / max_degree(moves)))


def _even_chunks(moves: list[Move], count: int) -> list[list[Move]]:
    """`count` consecutive chunks whose sizes differ by at most one (4 moves, 2 steps: 2+2)."""
    size, extra = divmod(len(moves), count)
    chunks, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        chunks.append(sorted(moves[start:end], key=lambda m: m.bin))
        start = end
    return chunks


def _with_gaps(steps: list[Step], gap_batches: int) -> list[Step]:
    spaced: list[Step] = []
    for index, step in enumerate(steps):
        if index:
            spaced.extend(Step() for _ in range(gap_batches))
        spaced.append(step)
    return spaced
