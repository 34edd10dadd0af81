"""Grouping bin moves so that no executor sends or receives twice in a group (Megaphone
§4.4): a proper edge colouring of the bipartite multigraph senders -> receivers, one edge
per move, whose colour classes are the groups.

König's theorem says the maximum degree Δ colours suffice and are needed; `EdgeColouring`
finds such a colouring with the textbook alternating-path argument and evens the class
sizes (de Werra). It is apart from migration.py, which plans the steps from its classes,
because it is one self-contained algorithm with its own invariants, and it only needs to
know each move's two ends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar


class Edge(Protocol):
    """A move as the colouring sees it: who sends, who receives."""

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...


E = TypeVar("E", bound=Edge)

# A vertex of the multigraph: ("out", executor) sends, ("in", executor) receives.
# One executor is two vertices, because sending and receiving are separate limits.
_Vertex = tuple[str, str]


def _ends(move: Edge) -> tuple[_Vertex, _Vertex]:
    return ("out", move.source), ("in", move.target)


def max_degree(moves: Sequence[Edge]) -> int:
    """Δ: the most moves one executor sends, or receives."""
    degree: dict[_Vertex, int] = {}
    for move in moves:
        for vertex in _ends(move):
            degree[vertex] = degree.get(vertex, 0) + 1
    return max(degree.values())


class EdgeColouring(Generic[E]):
    """A proper edge colouring of the bipartite move multigraph with `colours` colours.

    `colour_all` is König's constructive proof: for edge (u, v) take a colour `a` free at
    u and `b` free at v; if `a` is taken at v, swap a<->b along the alternating path that
    starts at v. In a bipartite graph that path never reaches u, so afterwards `a` is free
    at both ends. It needs only `colours >= Δ`. O(moves * path length); plans are small.

    `balance` then evens the class sizes (de Werra): when class i is two or more larger
    than class j, the union of the two matchings contains a path with one more i-edge than
    j-edges (it starts and ends with i); swapping its colours moves one edge from i to j.
    Each swap costs a walk over the executors, not the bins, so large bin counts are cheap.
    """

    def __init__(self, moves: Sequence[E], colours: int) -> None:
        self.moves = moves
        self.colours = colours
        self.colour_of = [-1] * len(moves)
        self.sizes = [0] * colours
        self.at: dict[_Vertex, dict[int, int]] = {}  # vertex -> colour -> edge index
        for move in moves:
            for vertex in _ends(move):
                self.at.setdefault(vertex, {})

    def colour_all(self) -> None:
        for edge, move in enumerate(self.moves):
            u, v = _ends(move)
            a, b = self._free_colour(u), self._free_colour(v)
            if a in self.at[v]:
                self._swap(self._alternating_path(v, a, b), a, b)
            self._paint(edge, a)

    def balance(self) -> None:
        """Shrink every class to at most `ceil(moves / colours)` edges (<= batch_size)."""
        limit = math.ceil(len(self.moves) / self.colours)
        over = [c for c in range(self.colours) if self.sizes[c] > limit]
        # Sizes sum to at most colours * limit, so while a class is over, another is under.
        under = [c for c in range(self.colours) if self.sizes[c] < limit]
        while over:
            big, small = over[-1], under[-1]
            self._swap(self._surplus_path(big, small), big, small)
            if self.sizes[big] <= limit:
                over.pop()
            if self.sizes[small] >= limit:
                under.pop()

    def classes(self) -> list[list[E]]:
        grouped: list[list[E]] = [[] for _ in range(self.colours)]
        for edge, colour in enumerate(self.colour_of):
            grouped[colour].append(self.moves[edge])
        return grouped

    def _free_colour(self, vertex: _Vertex) -> int:
        used = self.at[vertex]
        return next(c for c in range(self.colours) if c not in used)

    def _other_end(self, edge: int, vertex: _Vertex) -> _Vertex:
        u, v = _ends(self.moves[edge])
        return v if vertex == u else u

    def _alternating_path(self, start: _Vertex, first: int, second: int) -> list[int]:
        """Edges from `start` coloured first, second, first, ... as far as they go."""
        path: list[int] = []
        vertex, colour = start, first
        while colour in self.at[vertex]:
            edge = self.at[vertex][colour]
            path.append(edge)
            vertex = self._other_end(edge, vertex)
            colour = second if colour == first else first
        return path

    def _surplus_path(self, big: int, small: int) -> list[int]:
        """An alternating path of the union of two classes with one more `big` edge."""
        for vertex in sorted(self.at):
            if big in self.at[vertex] and small not in self.at[vertex]:
                path = self._alternating_path(vertex, big, small)
                if len(path) % 2 == 1:
                    return path
        raise AssertionError("unreachable: a larger matching always has a surplus path")

    def _swap(self, path: list[int], a: int, b: int) -> None:
        new_colours = [b if self.colour_of[e] == a else a for e in path]
        for edge in path:
            self.sizes[self.colour_of[edge]] -= 1
            for vertex in _ends(self.moves[edge]):
                del self.at[vertex][self.colour_of[edge]]
        for edge, colour in zip(path, new_colours, strict=True):
            self._paint(edge, colour)

    def _paint(self, edge: int, colour: int) -> None:
        self.colour_of[edge] = colour
        self.sizes[colour] += 1
        for vertex in _ends(self.moves[edge]):
            self.at[vertex][colour] = edge
