"""`swivel check-schedule`: exit codes 0/1/2, the human verdict, and `--output json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from swivel.cli.check_schedule import command

UPDATES = [
    {"event": "update", "operator": "A", "from": 1, "to": 2},
    {"event": "update", "operator": "B", "from": 1, "to": 2},
]


def process(record: str, operator: str, version: int) -> dict[str, Any]:
    return {"event": "process", "record": record, "operator": operator, "version": version}


def write(tmp_path: Path, *objects: dict[str, Any] | str) -> Path:
    """A schedule file; strings are written verbatim to make malformed lines."""
    path = tmp_path / "schedule.jsonl"
    lines = [o if isinstance(o, str) else json.dumps(o) for o in objects]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(*args: str, stdin: str | bytes | None = None) -> Result:
    return CliRunner().invoke(command, list(args), input=stdin)


def test_a_serializable_schedule_exits_0(tmp_path: Path) -> None:
    path = write(tmp_path, *UPDATES, process("r1", "A", 1), process("r1", "B", 1))
    result = run(str(path))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("serializable: each of 1 record(s) saw a single configuration")
    assert "1 update transaction: A 1->2, B 1->2" in result.output


def test_a_mixed_record_exits_1_and_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, process("r7", "A", 1), *UPDATES, process("r7", "B", 2))
    result = run(str(path))
    assert result.exit_code == 1
    assert result.output.startswith("NOT serializable: 1 of 1 record(s) mix configurations")
    assert "  r7: A@old(1) but B@new(2)\n" in result.output


def test_only_the_first_twenty_violations_are_listed(tmp_path: Path) -> None:
    mixed = [e for i in range(25) for e in (process(f"r{i}", "A", 1), process(f"r{i}", "B", 2))]
    result = run(str(write(tmp_path, *UPDATES, *mixed)))
    assert result.exit_code == 1
    listed = [line for line in result.output.splitlines() if line.startswith("  r")]
    assert len(listed) == 20
    assert listed[0] == "  r0: A@old(1) but B@new(2)"
    assert "... and 5 more" in result.output


def test_sequential_transactions_are_described_in_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"event": "update", "operator": "A", "from": 2, "to": 3, "txn": 8},
        {"event": "update", "operator": "A", "from": 1, "to": 2, "txn": 7},
        process("r", "A", 3),
    )
    result = run(str(path))
    assert result.exit_code == 0
    assert "2 update transactions: [A 1->2] then [A 2->3]" in result.output


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ("not json", "not JSON"),
        ('{"event": "process", "record": "r1", "operator": "A"}', "missing field 'version'"),
        ('{"event": "process", "record": "r1", "operator": "A", "version": "1"}', "integer"),
        ('{"event": "rollback"}', "unknown event 'rollback'"),
        ('{"event": "process", "record": "r1", "operator": "A", "version": 9}', "never had"),
        ('{"event": "update", "operator": "A", "from": 1, "to": 3}', "updated from version 1"),
    ],
)
def test_malformed_input_exits_2_naming_the_line(
    tmp_path: Path, bad_line: str, reason: str
) -> None:
    path = write(tmp_path, *UPDATES, "", bad_line)
    result = run(str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: line 4: ")
    assert reason in result.stderr
    assert "Traceback" not in result.output


def test_a_line_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "schedule.jsonl"
    path.write_bytes(json.dumps(UPDATES[0]).encode() + b'\n{"event": "\xff"}\n')
    result = run(str(path))
    assert result.exit_code == 2
    assert "line 2: not UTF-8" in result.stderr


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = run(str(tmp_path / "absent.jsonl"))
    assert result.exit_code == 2
    assert "absent.jsonl" in result.output


def test_dash_reads_stdin() -> None:
    lines = [*UPDATES, process("r", "A", 2), process("r", "B", 1)]
    result = run("-", stdin="\n".join(json.dumps(o) for o in lines))
    assert result.exit_code == 1
    assert "r: B@old(1) but A@new(2)" in result.output


def test_json_output_is_a_machine_readable_verdict(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        *UPDATES,
        process("r1", "A", 1),
        process("r1", "B", 2),
        process("r2", "A", 2),
        process("r3", "C", 5),
    )
    result = run("--output", "json", str(path))
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "serializable": False,
        "records": 3,
        "process_events": 4,
        "violations": [
            {
                "record": "r1",
                "old": [{"operator": "A", "version": 1}],
                "new": [{"operator": "B", "version": 2}],
            }
        ],
        "updates": {"A": [1, 2], "B": [1, 2]},
        "transactions": [
            {"txn": None, "updates": {"A": {"from": 1, "to": 2}, "B": {"from": 1, "to": 2}}}
        ],
    }


def test_json_output_of_a_serializable_schedule_exits_0() -> None:
    result = run("--output", "json", "-", stdin=json.dumps(process("r", "A", 1)))
    assert result.exit_code == 0
    verdict = json.loads(result.stdout)
    assert (verdict["serializable"], verdict["violations"], verdict["updates"]) == (True, [], {})


def test_json_output_reports_malformed_input_as_json(tmp_path: Path) -> None:
    result = run("--output", "json", str(write(tmp_path, *UPDATES, "[]")))
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "error": {"line": 3, "reason": "expected a JSON object, got array"}
    }


def test_the_swivel_group_offers_the_command(tmp_path: Path) -> None:
    from swivel.cli.main import _register, cli

    _register()
    path = write(tmp_path, *UPDATES, process("r", "A", 1), process("r", "B", 2))
    result = CliRunner().invoke(cli, ["check-schedule", str(path)])
    assert result.exit_code == 1
    assert "r: A@old(1) but B@new(2)" in result.output


def test_python_dash_m_swivel_runs_it(tmp_path: Path) -> None:
    path = write(tmp_path, *UPDATES, process("r", "A", 1), "{oops")
    finished = subprocess.run(
        [sys.executable, "-m", "swivel", "check-schedule", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 2, finished.stderr
    assert finished.stderr.startswith("error: line 4: not JSON")
    assert "Traceback" not in finished.stderr
