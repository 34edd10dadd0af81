"""The body a worker's ack thread posts when it has counts to report (`AckReport`: no acks,
one worker's counts for one bin), shared by the agent's unit and integration tests."""

from __future__ import annotations

from typing import Any


def counts_report(
    pid: int,
    seq: int,
    bin_id: int = 4,
    *,
    rows: int = 9,
    busy_s: float = 0.3,
    operator: str = "customer-detector",
) -> dict[str, Any]:
    partition = {"operator": operator, "partition": bin_id, "rows": rows, "busySeconds": busy_s}
    return {
        "acks": [],
        "counts": [{"pid": pid, "seq": seq, "intervalSeconds": 1.0, "partitions": [partition]}],
    }
