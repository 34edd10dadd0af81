"""Building blocks for the MCS tests: operators by the flags Fries' rules read."""

from __future__ import annotations

import itertools

from swivel.api.vocabulary import Cardinality
from swivel.controllers.graph import Operator
from swivel.controllers.mcs import McsPlan


def one_to_many(name: str, **flags: bool) -> Operator:
    return Operator(name, Cardinality.ONE_TO_MANY, **flags)


def replicate(name: str) -> Operator:
    """Fig. 9's Replicate: one-to-many, but one tuple per out-edge."""
    return one_to_many(name, at_most_one_per_edge=True)


def unique(name: str) -> Operator:
    """Fig. 10's self-join on the primary key: at most one output per source record."""
    return Operator(name, unique_per_record=True)


def split(name: str) -> Operator:
    """The paper's Split (Figs. 6 and 8): one-to-one, each tuple down *one* out-edge."""
    return Operator(name, routes=True)


def blocking(name: str) -> Operator:
    return Operator(name, blocking=True)


def chain(*names: str) -> list[tuple[str, str]]:
    return list(itertools.pairwise(names))


def components(plan: McsPlan) -> list[set[str]]:
    return [set(c.operators) for c in plan.components]
