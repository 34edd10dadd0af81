"""`swivel bench reconfiguration` at smoke size: the JSON contract, and fries consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Unstable: ~150 s on a quiet machine, but a clean-clone CI run hit the 400 s limit.
pytestmark = [pytest.mark.spark, pytest.mark.unstable, pytest.mark.timeout(420)]


def test_bench_prints_the_contract(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "swivel", "bench", "reconfiguration", "--output", "json",
         "--trials", "1", "--size", "smoke", "--surge-batch-s", "1.5", "--after-s", "0.5",
         "--workdir", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    schedulers = document["schedulers"]
    assert set(schedulers) == {"fries", "epoch", "restart", "naive"}
    for entry in schedulers.values():
        assert set(entry["delay_ms"]) >= {"p50", "max"}
        assert entry["trials"] == 1
        assert isinstance(entry["violations"], int)
    assert schedulers["fries"]["violations"] == 0
    assert schedulers["fries"]["delay_ms"]["p50"] is not None
    assert set(document["ratios"]) == {"fries/epoch", "fries/restart"}
    assert document["control_channel"]["ratio"] > 0
