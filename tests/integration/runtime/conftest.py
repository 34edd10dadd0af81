"""Jobs the runtime tests share: small bins and cheap models keep each run to seconds."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from swivel.api.dataflow import DataflowSpec
from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJobSpec

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fraud-detection" / "streamjob.yaml"


def small_fraud_job(work: int = 50, bins: int = 4) -> StreamJobSpec:
    """The example job with 4 bins, 16 customers, 8 merchants and a lighter expensive model."""
    spec = load_streamjob(EXAMPLE).spec
    wire = spec.dataflow.model_dump(by_alias=True)
    wire["bins"] = bins
    for op in wire["operators"]:
        if op["name"] == "customer-detector":
            op["params"] = {**op["params"], "work": work}
    source = spec.source.model_copy(update={"options": {"customers": "16", "merchants": "8"}})
    return spec.model_copy(update={"dataflow": DataflowSpec.model_validate(wire), "source": source})


def labelling_job(delay_ms: float = 0.0) -> StreamJobSpec:
    """source -> label (stateless, `delay_ms` per Arrow batch) -> sink."""
    return StreamJobSpec.model_validate(
        {
            "sparkConf": {"spark.sql.execution.arrow.maxRecordsPerBatch": "50"},
            "dataflow": {
                "bins": 4,
                "operators": [
                    {"name": "payments", "kind": "source"},
                    {
                        "name": "label",
                        "inputs": ["payments"],
                        "function": "swivel.jobs.examples.labels:labelled",
                        "params": {"label": "v1", "delay_ms": delay_ms},
                    },
                    {"name": "out", "kind": "sink", "inputs": ["label"]},
                ],
            },
        }
    )


@pytest.fixture
def fraud_job() -> StreamJobSpec:
    """Two bins on local[2]: each stateful stage runs in one wave of tasks (with 4, two),
    and each operator still has parallel workers."""
    return small_fraud_job(bins=2)


@pytest.fixture
def make_fraud_job():  # type: ignore[no-untyped-def]
    return small_fraud_job


@pytest.fixture
def make_labelling_job():  # type: ignore[no-untyped-def]
    return labelling_job


@pytest.fixture
def example_job() -> StreamJobSpec:
    return load_streamjob(EXAMPLE).spec


def http(url: str, method: str, body: Any, token: str) -> tuple[int, Any]:
    """(status, parsed JSON) of one request to the agent with the operator's credential."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
