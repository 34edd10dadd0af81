"""The keyed wrapper's per-key-group work (no Spark session) and the JSON progress listener."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

from swivel.jobs.runtime.feeds import StaticFeed
from swivel.jobs.runtime.listening import ProgressListener, _JsonProgress
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
    decode_state,
    encode_state,
    run_keyed_group,
)
from swivel.protocol.snapshots import OperatorConfig, Snapshot

MODEL = "swivel.jobs.examples.fraud:customer_model"
INPUT = ("_swivel_record", "_swivel_ts", "customer", "amount", "_swivel_tag_0")
EMITTED = ("customer_score", "customer_flag", "customer_model")


def _runner(output: tuple[str, ...]) -> OperatorRunner:
    config = OperatorConfig(function=MODEL, version=1, params={"model": "cheap"})
    snapshot = Snapshot(config_version=1, revision=1, operators={"detector": config})
    plan = OperatorPlan("detector", True, "customer", INPUT, output, config)
    return OperatorRunner(plan, WorkerSettings(StaticFeed(snapshot)))


def _chunk() -> pd.DataFrame:
    # as transformWithStateInPandas hands it over: `_x` columns renamed by position
    return pd.DataFrame(
        {"_0": ["p1", "p2"], "_1": [1_700_000_000_000_000] * 2, "customer": [7, 7],
         "amount": [10.0, 30.0], "_4": [0, 0]}
    )  # fmt: skip


def test_a_key_group_keeps_the_system_columns_in_the_compiled_order() -> None:
    output = (*INPUT, *EMITTED, EMITTED_COLUMN)
    state = decode_state(None)
    (out,) = run_keyed_group(_runner(output), (7,), iter([_chunk()]), state)
    assert tuple(out.columns) == output
    assert list(out["_swivel_record"]) == ["p1", "p2"]
    assert list(out["_swivel_ts"]) == [1_700_000_000_000_000] * 2  # epoch micros ride along
    assert json.loads(encode_state(state)[0]) == {"count": 2, "total": 40.0}


def test_output_columns_in_another_order_are_reordered() -> None:
    output = (EMITTED_COLUMN, *reversed(EMITTED), *INPUT)
    (out,) = run_keyed_group(_runner(output), (7,), iter([_chunk()]), decode_state(None))
    assert tuple(out.columns) == output


class _Recorder(ProgressListener):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def onQueryStarted(self, event: Any) -> None:
        return None

    def onQueryProgress(self, event: Any) -> None:
        self.events.append(event)

    def onQueryTerminated(self, event: Any) -> None:
        return None


class _JavaProgressEvent:
    """What py4j hands the callback: only `progress().json()` is used."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def progress(self) -> Any:
        return self

    def json(self) -> str:
        return json.dumps(self.document)


def test_a_progress_event_crosses_py4j_as_one_json_document() -> None:
    document = {
        "id": "8f82787f-1ecc-4de4-aef6-076740821a28",
        "runId": "1cc524c5-2b47-4a07-8a3a-c4b2d5e1f32e",
        "name": "job", "timestamp": "2026-11-21T16:00:00.000Z", "batchId": 41,
        "batchDuration": 2400, "numInputRows": 1000,
        "durationMs": {"triggerExecution": 2399, "addBatch": 2100},
        "stateOperators": [{"operatorName": "transformWithStateExec", "numRowsTotal": 200,
                            "numRowsUpdated": 200, "allUpdatesTimeMs": 5, "numRowsRemoved": 0,
                            "allRemovalsTimeMs": 0, "commitTimeMs": 40, "memoryUsedBytes": 4096,
                            "numRowsDroppedByWatermark": 0, "numShufflePartitions": 16,
                            "numStateStoreInstances": 16, "customMetrics": {"rocksdbPutCount": 200}}],
        "sources": [{"description": "rate", "startOffset": 1, "endOffset": 2,
                     "latestOffset": 2, "numInputRows": 1000, "inputRowsPerSecond": 400.0,
                     "processedRowsPerSecond": 416.8}],
        "sink": {"description": "noop", "numOutputRows": 1000},
    }  # fmt: skip
    listener = _Recorder()
    _JsonProgress(listener).onQueryProgress(_JavaProgressEvent(document))
    (event,) = listener.events
    progress = event.progress
    assert progress.batchId == 41
    assert str(progress.runId) == document["runId"]
    assert progress.durationMs["triggerExecution"] == 2399
    assert progress.numInputRows == 1000
    assert progress.stateOperators[0].numRowsTotal == 200


class _AgentLikeFeed(StaticFeed):
    """A feed with an agent URL that records the acks it is given."""

    def __init__(self, snapshot: Snapshot, url: str) -> None:
        super().__init__(snapshot)
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "acks", [])

    def ack(  # noqa: PLR0917
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None,
        batch_id: int | None,
        at: float | None = None,
    ) -> None:
        self.acks.append((operator, version, config_version))  # type: ignore[attr-defined]


def test_a_reused_worker_acks_again_to_a_new_agent_whose_versions_start_over() -> None:
    output = (*INPUT, *EMITTED, EMITTED_COLUMN)
    config = OperatorConfig(function=MODEL, version=1, params={"model": "cheap"})
    snapshot = Snapshot(config_version=1, revision=1, operators={"detector": config})
    plan = OperatorPlan("detector", True, "customer", INPUT, output, config)
    feeds = [_AgentLikeFeed(snapshot, f"http://127.0.0.1:{port}") for port in (8001, 8002)]
    for feed in [*feeds, feeds[0]]:
        runner = OperatorRunner(plan, WorkerSettings(feed))
        list(run_keyed_group(runner, (7,), iter([_chunk()]), decode_state(None)))
    assert [f.acks for f in feeds] == [[("detector", 1, 1)], [("detector", 1, 1)]]  # type: ignore[attr-defined]
