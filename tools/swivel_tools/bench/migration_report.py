"""The parts of `swivel bench migration`'s JSON that describe the run rather than measure
a strategy: the load average at each stage, each size's result kept as soon as it is
measured, and the per-size extras of the sweep. Apart from the run (`migration.py`)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def load_average(label: str) -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    return {"at": label, "time": round(time.time(), 1), "1m": one, "5m": five, "15m": fifteen}


def keep_size_result(root: Path, size: dict[str, Any]) -> None:
    """Write one size's result as soon as it is measured (`<workdir>/size-<keys>.json`): a
    sweep takes an hour on an idle machine, and a later size that fails (executor memory)
    must not take the measured ones with it."""
    path = root / f"size-{size['keys']}.json"
    path.write_text(json.dumps(size, indent=2, default=str))
    print(f"keys={size['keys']}: measured, kept in {path}", file=sys.stderr, flush=True)


def size_extras(size: dict[str, Any]) -> dict[str, Any]:
    keep = ("steady_p50_ms", "state_rows", "state_bytes", "moved", "steady_run", "snapshot_phases")
    return {k: size[k] for k in keep}
