"""Which batch compacted a file source's metadata log (jobs/migration/source_log.py): read
from the query's latest progress, Spark's rule `(entry + 1) % interval == 0` on the entry
the batch wrote (its own `endOffset`, or the previous batch's plus one)."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.jobs.migration.source_log import compacted_source_log


def progress(batch: int, entry: Any, description: str = "FileStreamSource[file:/in]") -> Any:
    return {"batchId": batch, "sources": [{"description": description, "endOffset": entry}]}


@pytest.mark.parametrize(
    ("reported", "entry", "batch", "compacts"),
    [
        (9, {"logOffset": 9}, 9, True),  # the batch's own progress: it wrote entry 9
        (8, {"logOffset": 8}, 9, True),  # the batch before: the next entry, 9
        (8, {"logOffset": 8}, 8, False),
        (18, {"logOffset": 18}, 19, True),
        (7, {"logOffset": 7}, 9, False),  # an older progress says nothing of batch 9
        (9, '{"logOffset": 9}', 9, True),  # the offset as JSON text
        (9, {"logOffset": "9"}, 9, False),  # not a number
        (9, {"logOffset": True}, 9, False),
        (9, "not json", 9, False),
        (9, None, 9, False),
    ],
)
def test_the_rule_on_the_entry_the_batch_wrote(
    reported: int, entry: Any, batch: int, compacts: bool
) -> None:
    assert compacted_source_log(progress(reported, entry), batch, 10) is compacts


def test_no_progress_another_source_or_no_interval_is_no_compaction() -> None:
    assert not compacted_source_log(None, 9, 10)
    rate = progress(9, {"logOffset": 9}, description="RateStreamV2[rowsPerSecond=1]")
    assert not compacted_source_log(rate, 9, 10)
    assert not compacted_source_log(progress(9, {"logOffset": 9}), 9, 1)
    assert not compacted_source_log(progress(9, {"logOffset": 9}), 9, 0)


def test_any_file_source_of_several_counts() -> None:
    both = {
        "batchId": 4,
        "sources": [
            {"description": "FileStreamSource[file:/a]", "endOffset": {"logOffset": 2}},
            {"description": "FileStreamSource[file:/b]", "endOffset": {"logOffset": 3}},
        ],
    }
    assert compacted_source_log(both, 4, 4)  # b's entry 3: (3 + 1) % 4 == 0
    assert not compacted_source_log(both, 4, 5)
