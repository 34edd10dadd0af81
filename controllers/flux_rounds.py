"""The data of a Flux round, shared by both of Flux's policies (see `flux.py`).

A round's statistics go in (`ExecutorLoad`, `BinLoad`), a `RoundDecision` comes out: the
moves, the target assignment (bin -> executor) that the migration planner turns into
steps, and for every pair of executors the reason it did or did not move a bin -- so a
round can be printed, diffed and tested without a cluster. When rounds happen -- the
collection phase, the move phase and Flux's damping -- is `flux_phases`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from swivel.controllers.errors import PlanningError


class FluxInputError(PlanningError):
    """Statistics that do not describe one consistent placement. `field` says where."""


@dataclass(frozen=True, slots=True)
class ExecutorLoad:
    """One executor's statistics for one collection phase.

    `busy_s` is the time its task slots spent processing during the `window_s`-long phase,
    averaged over its slots, so utilisation = busy / window = 1 - Flux's idle fraction.
    `memory_bytes` is the state it holds now; `memory_limit_bytes` is what it may hold
    (None: unknown, so the memory policy neither relieves it nor sends it bins).
    """

    executor: str
    busy_s: float
    window_s: float
    memory_bytes: int = 0
    memory_limit_bytes: int | None = None

    def __post_init__(self) -> None:
        if not self.window_s > 0:
            raise FluxInputError(f"{self.executor}.window_s", "must be positive")
        if not self.busy_s >= 0:
            raise FluxInputError(f"{self.executor}.busy_s", "must not be negative")
        if self.memory_bytes < 0:
            raise FluxInputError(f"{self.executor}.memory_bytes", "must not be negative")
        if self.memory_limit_bytes is not None and self.memory_limit_bytes < 0:
            raise FluxInputError(f"{self.executor}.memory_limit_bytes", "must not be negative")

    @property
    def utilisation(self) -> float:
        return self.busy_s / self.window_s


@dataclass(frozen=True, slots=True)
class BinLoad:
    """One bin's statistics: where they were counted, records processed, state held."""

    bin: int
    executor: str
    records: int
    state_bytes: int = 0

    def __post_init__(self) -> None:
        if self.records < 0 or self.state_bytes < 0:
            raise FluxInputError(f"bins[{self.bin}]", "records and state_bytes must be >= 0")


class BinMove(NamedTuple):
    bin: int
    source: str
    target: str


class PairOutcome(enum.StrEnum):
    """Why a (donor, receiver) pair did or did not move a bin; the values read as reasons."""

    MOVED = "moved a bin"
    DONOR_NOT_ABOVE_AVERAGE = "donor not above the average utilisation"
    BELOW_IMBALANCE_THRESHOLD = "below imbalance threshold"
    RECEIVER_TOO_BUSY = "receiver above its utilisation threshold"
    NO_SUITABLE_BIN = "no bin narrows the gap without overfilling the receiver"
    NO_RECEIVER_WITH_ROOM = "no executor has memory to spare"


class BinRejection(enum.StrEnum):
    DOES_NOT_REDUCE_IMBALANCE = "would not reduce the imbalance"
    OVERFILLS_RECEIVER = "would push the receiver over its utilisation threshold"
    EXCEEDS_RECEIVER_MEMORY = "would push the receiver over its memory limit"
    FREES_NO_MEMORY = "holds no state, so moving it frees no memory"


@dataclass(frozen=True, slots=True)
class PairDecision:
    donor: str
    receiver: str | None  # None: a memory donor left without a receiver
    outcome: PairOutcome
    moved_bin: int | None = None
    rejected_bins: tuple[tuple[int, BinRejection], ...] = ()


@dataclass(frozen=True)
class RoundDecision:
    """One round's plan. Estimates assume Flux's model: per-bin record counts and each
    executor's processing rate stay as they were during the collection phase."""

    moves: tuple[BinMove, ...]
    target_assignment: dict[int, str]
    pairs: tuple[PairDecision, ...]
    utilisation_after: dict[str, float]
    memory_after: dict[str, int]

    @property
    def moved(self) -> bool:
        return bool(self.moves)


@dataclass(frozen=True, slots=True)
class Site:
    """One executor's statistics as both policies read them (not part of the public API)."""

    load: ExecutorLoad
    bins: tuple[BinLoad, ...]  # most records first
    records: int

    @property
    def name(self) -> str:
        return self.load.executor

    @property
    def utilisation(self) -> float:
        return self.load.utilisation

    def share(self, bin_load: BinLoad) -> float:
        """The utilisation a bin accounts for: its share of this executor's records times
        the executor's utilisation (Flux: tuples per partition and the site's processing
        rate stay fixed). A receiver is assumed to gain exactly this much: Swivel's
        executors come from one pod template, and a receiver's own per-record cost,
        measured on few records, is dominated by fixed per-batch overhead."""
        return 0.0 if self.records == 0 else self.utilisation * bin_load.records / self.records


def index_sites(
    executors: Iterable[ExecutorLoad], bins: Iterable[BinLoad], assignment: Mapping[int, str]
) -> dict[str, Site]:
    """Index the statistics by executor, refusing any that do not match the placement.

    A bin counted on one executor but now assigned to another moved during the
    collection phase; its numbers describe neither executor, so the caller must collect
    again (Flux never mixes: collection always follows the move phase)."""
    loads: dict[str, ExecutorLoad] = {}
    for load in executors:
        if load.executor in loads:
            raise FluxInputError("executors", f"duplicate executor {load.executor!r}")
        loads[load.executor] = load
    owned: dict[str, list[BinLoad]] = {name: [] for name in loads}
    seen: set[int] = set()
    for bin_load in bins:
        where = assignment.get(bin_load.bin)
        if bin_load.bin in seen:
            raise FluxInputError(f"bins[{bin_load.bin}]", "reported twice")
        if where is None:
            raise FluxInputError(f"bins[{bin_load.bin}]", "not in the assignment")
        if where != bin_load.executor:
            raise FluxInputError(
                f"bins[{bin_load.bin}]",
                f"counted on {bin_load.executor!r} but assigned to {where!r}; collect again",
            )
        seen.add(bin_load.bin)
        owned.setdefault(where, []).append(bin_load)
    for bin_id, where in assignment.items():
        if where not in loads:
            raise FluxInputError(f"assignment[{bin_id}]", f"no statistics for {where!r}")
    return {name: _site(loads[name], owned[name]) for name in loads}


def _site(load: ExecutorLoad, bins: list[BinLoad]) -> Site:
    ordered = tuple(sorted(bins, key=lambda b: (-b.records, b.bin)))
    return Site(load, ordered, sum(b.records for b in ordered))


def decide_round(
    sites: Mapping[str, Site], assignment: Mapping[int, str], pairs: list[PairDecision]
) -> RoundDecision:
    """Turn the pairs' choices into moves, the target placement and the estimates after."""
    bins = {b.bin: b for site in sites.values() for b in site.bins}
    utilisation = {name: site.utilisation for name, site in sites.items()}
    memory = {name: site.load.memory_bytes for name, site in sites.items()}
    target = dict(assignment)
    moves: list[BinMove] = []
    for pair in pairs:
        if pair.moved_bin is None or pair.receiver is None:
            continue
        moved = bins[pair.moved_bin]
        share = sites[pair.donor].share(moved)
        utilisation[pair.donor] -= share
        utilisation[pair.receiver] += share
        memory[pair.donor] = max(0, memory[pair.donor] - moved.state_bytes)
        memory[pair.receiver] += moved.state_bytes
        target[moved.bin] = pair.receiver
        moves.append(BinMove(moved.bin, pair.donor, pair.receiver))
    return RoundDecision(tuple(moves), target, tuple(pairs), utilisation, memory)
