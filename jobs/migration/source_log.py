"""Which micro-batch compacts a file source's metadata log, so that a prewarmed switch does
not land on it (docs/migration.md, "The input's log compaction").

A file source (`FileStreamSource`) records the files each batch reads as one entry of its
metadata log in the checkpoint, and every `compactInterval`-th entry (Spark's
`CompactibleFileStreamLog`: entry `L` compacts when `(L + 1) % interval == 0`; the session
setting `spark.sql.streaming.fileSource.log.compactInterval`, 10 by default, read by
`SparkInternals.source_log_compact_interval`) first reads
the entries since the last compaction and writes them as one file. That happens in the
batch's `latestOffset`, before its tasks: on a remote checkpoint one open per entry, ~225
ms on the bench's remote-like storage every tenth batch, migration or not. A prewarmed
step's switch runs at the end of the batch it follows (inside `foreachBatch`), so a switch
after a compacting batch adds to the slowest batch of ten; one batch later it does not.
Spark decides compaction from the log's own entry ids, which the query's progress reports as
the file source's `logOffset`; this module reads only that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

FILE_SOURCE = "FileStreamSource"  # how a file source's progress `description` begins


def compacted_source_log(progress: Mapping[str, Any] | None, batch_id: int, interval: int) -> bool:
    """Whether batch `batch_id` wrote a compacting entry of a file source's log, read from
    the query's latest progress: that batch's own (its `endOffset` is the entry it wrote),
    or the one before it (it wrote the next entry, if it found new files; a batch that
    found none writes none, and this guess is then one batch early: the switch waits one
    batch it need not have). False for any other progress, any other source, or an
    interval below 2."""
    if progress is None or interval < 2:
        return False
    reported = progress.get("batchId")
    if reported == batch_id:
        ahead = 0
    elif reported == batch_id - 1:
        ahead = 1
    else:
        return False
    for source in progress.get("sources") or ():
        if not str(source.get("description", "")).startswith(FILE_SOURCE):
            continue
        entry = _log_offset(source.get("endOffset"))
        if entry is not None and (entry + ahead + 1) % interval == 0:
            return True
    return False


def _log_offset(offset: Any) -> int | None:
    """A file source's `logOffset` from its progress offset (a JSON object, or its text)."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return None
    if not isinstance(offset, Mapping):
        return None
    value = offset.get("logOffset")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
