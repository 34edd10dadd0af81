"""`swivel demo`'s table: the in-effect delay first, whole in an 80-column terminal."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps
from rich.console import Console

from swivel.cli.demo import _table


def _trial(scheduler: str, delay_ms: float, armed_ms: float) -> SimpleNamespace:
    return SimpleNamespace(scheduler=scheduler, delay_ms=delay_ms, armed_ms=armed_ms,
                           batch_ms_before=5123.0, requested_at=100.0, completed_at=117.0,
                           violations=0, records=123456)  # fmt: skip


def test_the_table_fits_80_columns_and_leads_with_the_in_effect_delay() -> None:
    rows = pd.DataFrame({"emitted_at": [95.0, 99.0, 118.0], "latency_s": [12.5, 13.0, 1.5]})
    trials = [_trial("fries", 212.4, 19.3), _trial("epoch", 4252.0, 4252.0),
              _trial("restart", 15210.0, 15001.0), _trial("restart-warm", 5521.0, 5500.0)]  # fmt: skip
    console = Console(width=80, record=True)
    console.print(_table(trials, rows, after_s=10.0))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "…" not in text  # nothing cut
    header = next(line for line in lines if "scheduler" in line)
    assert header.index("in effect") < header.index("armed")
    fries = next(line for line in lines if line.strip().startswith("fries"))
    assert fries.split()[1:5] == ["212", "ms", "19", "ms"]
    assert "15210 ms" in text and "restart-warm" in text and "12.8 s" in text
