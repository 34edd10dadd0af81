"""Which configuration an operator runs an Arrow batch's rows under, and which tag it writes.

The rules are `swivel.jobs.control.selection.select` (the protocol's table); this module
applies them to a pandas batch: a non-head of a Fries component reads each row's tag
`_swivel_tag_<k>` and the batch is split by tag value (old rows first); a head writes the
version it used into its component's tag column; everyone else runs the whole batch under
one selection and passes tags on untouched. A component may have several heads on branches
that meet again (a union): they all write the component's one column, so a non-head below
the merge gets rows stamped by either head in one batch and splits them per row like any.

The query's schema is fixed when it starts while component ids are chosen per transition,
so the compiled query carries one tag column per possible component: a transition has at
most as many components as the job has function operators (`tag_columns`). The source
fills them with 0, "before any switch", which `select` reads like a missing tag.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.control.selection import Selection, select, tag_column
from swivel.protocol.snapshots import Snapshot

__all__ = ["Part", "newest_tag", "parts", "tag_column", "tag_columns", "tag_order"]


TAG_PREFIX = tag_column(0)[:-1]  # "_swivel_tag_"


def tag_columns(function_operators: int) -> tuple[str, ...]:
    return tuple(tag_column(k) for k in range(max(function_operators, 1)))


@dataclass(frozen=True)
class Part:
    """Rows of one batch that run under one selection; `write_tag` names the head's column."""

    rows: pd.DataFrame
    selection: Selection
    write_tag: str | None


def _follows_tag(snapshot: Snapshot, operator: str) -> str | None:
    """The tag column a non-head of a Fries component reads, else None."""
    transition = snapshot.transition
    if transition is None or transition.scheduler != "fries":
        return None
    component = transition.component_of(operator)
    if component is None or operator in component.heads:
        return None
    return tag_column(component.id)


def newest_tag(pdf: pd.DataFrame) -> int:
    """The newest configuration version any head stamped on these rows (0: none).

    Every tag column counts, not only the one the operator follows under the snapshot it
    holds: a snapshot older than the transition does not say which column that is (nor that
    the operator follows one). A tag newer than the process's snapshot means a head already
    ran under a configuration this process has not heard of; the wrapper reads the agent
    synchronously before it runs such rows (`operators.OperatorRunner.snapshot_for`).
    ~10 µs for a few rows and tag columns.
    """
    if not len(pdf):
        return 0
    newest = 0
    for column in pdf.columns:
        if column.startswith(TAG_PREFIX):
            top = pdf[column].to_numpy().max()
            if pd.isna(top):  # a merge may leave gaps (NaN) where a branch had no column
                top = pdf[column].max()
            if not pd.isna(top) and top > newest:
                newest = int(top)
    return newest


def parts(
    snapshot: Snapshot,
    operator: str,
    pdf: pd.DataFrame,
    *,
    batch_id: int | None,
    started_config_version: int | None,
) -> Iterator[Part]:
    column = _follows_tag(snapshot, operator)
    if column is not None and column in pdf.columns:
        tags = pdf[column]
        for tag in sorted(tags.unique()):
            selection = select(
                snapshot,
                operator,
                tag=int(tag),
                batch_id=batch_id,
                started_config_version=started_config_version,
            )
            yield Part(pdf[tags == tag], selection, None)
        return
    selection = select(
        snapshot, operator, batch_id=batch_id, started_config_version=started_config_version
    )
    transition = snapshot.transition
    component = transition.component_of(operator) if transition is not None else None
    heads = component is not None and operator in component.heads and selection.tag is not None
    yield Part(pdf, selection, tag_column(component.id) if heads and component else None)


def tag_order(snapshot: Snapshot, operator: str, pdf: pd.DataFrame) -> pd.DataFrame:
    """`pdf` with its rows in tag order (stable) when `operator` follows a component's tag.

    A keyed non-head runs a key's whole batch this way (`operators.run_keyed_group`): rows
    stamped before the switch (tag 0 or the old version) first, then the new ones, so the
    key's state is transformed once, between the two. Any other operator keeps the order.
    """
    column = _follows_tag(snapshot, operator)
    if column is None or column not in pdf.columns or len(pdf) < 2:
        return pdf
    if pdf[column].is_monotonic_increasing:
        return pdf
    return pdf.sort_values(column, kind="stable", ignore_index=True)
