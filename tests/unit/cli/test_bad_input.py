"""Hostile and careless input to the CLI: every input is exit 2 with `field: reason` (or a
valid result), never a traceback (issue 11 §3). The corpus: `bad_input_corpus.py`; each
command runs in-process through its click entry point.

`.venv/bin/python -m tests.unit.cli.test_bad_input` (from the repository root) prints the
per-surface table that docs/reliability.md quotes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from swivel.cli.check_schedule import command as check_schedule
from swivel.cli.plan import command as plan
from swivel.cli.run import command as run
from tests.unit.cli.bad_input_corpus import (
    FIELD_REASON,
    FRAUD,
    ROOT,
    Case,
    dump,
    plan_cases,
    run_compile_cases,
    schedule_cases,
)


@dataclass(frozen=True)
class Outcome:
    case: Case
    exit_code: int
    output: str
    crashed: bool  # an exception escaped the command (a traceback for a user)

    @property
    def clean(self) -> bool:
        if self.crashed or "Traceback" in self.output:
            return False
        if self.case.exit_code is not None:
            return self.exit_code == self.case.exit_code
        if self.case.valid:
            return self.exit_code == 0
        return self.exit_code == 2 and FIELD_REASON.search(self.output) is not None


def _invoke(command: Any, args: list[str]) -> tuple[int, str, bool]:
    result = CliRunner().invoke(command, args)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    return result.exit_code, result.output, crashed


def _file(folder: Path, name: str, data: bytes | None, default: Path) -> str:
    if data is None:
        return str(default)
    path = folder / name
    path.write_bytes(data)
    return str(path)


def try_plan(case: Case, folder: Path) -> Outcome:
    job = case.path or _file(folder, "job.yaml", case.job, FRAUD / "streamjob.yaml")
    reconf = _file(folder, "reconf.yaml", case.reconf, FRAUD / "reconfiguration.yaml")
    return Outcome(case, *_invoke(plan, [reconf, "--job", job]))


def try_check_schedule(case: Case, folder: Path) -> Outcome:
    path = case.path or _file(folder, "schedule.jsonl", case.job, Path("-"))
    code, output, crashed = _invoke(check_schedule, [path])
    # check-schedule words a malformed line as `error: line N: reason`.
    return Outcome(case, code, output, crashed)


def try_run(case: Case, folder: Path) -> Outcome:
    job = _file(folder, "job.yaml", case.job, FRAUD / "streamjob.yaml")
    return Outcome(case, *_invoke(run, [job, "--workdir", str(folder / "work")]))


SURFACES: dict[str, tuple[Callable[[], Iterator[Case]], Callable[[Case, Path], Outcome]]] = {
    "swivel plan": (plan_cases, try_plan),
    "swivel check-schedule": (schedule_cases, try_check_schedule),
    "swivel run (compile)": (run_compile_cases, try_run),
}


def _ids(cases: Iterator[Case]) -> list[Any]:
    return [pytest.param(c, id=c.name) for c in cases]


@pytest.mark.parametrize("case", _ids(plan_cases()))
def test_plan_answers_every_input_cleanly(case: Case, tmp_path: Path) -> None:
    outcome = try_plan(case, tmp_path)
    assert outcome.clean, (outcome.exit_code, outcome.output[-2000:])


@pytest.mark.parametrize("case", _ids(schedule_cases()))
def test_check_schedule_answers_every_input_cleanly(case: Case, tmp_path: Path) -> None:
    outcome = try_check_schedule(case, tmp_path)
    assert outcome.clean, (outcome.exit_code, outcome.output[-2000:])


@pytest.mark.parametrize("case", _ids(run_compile_cases()))
def test_run_refuses_a_dataflow_that_cannot_compile_before_spark(
    case: Case, tmp_path: Path
) -> None:
    outcome = try_run(case, tmp_path)
    assert outcome.clean, (outcome.exit_code, outcome.output[-2000:])
    assert not (tmp_path / "work").exists()  # refused before anything started


def test_the_corpus_is_the_size_the_docs_quote() -> None:
    assert len(list(plan_cases())) >= 100
    assert len(list(schedule_cases())) >= 35


def table(folder: Path) -> list[tuple[str, int, int, int]]:
    """(surface, inputs tried, clean answers, tracebacks) for docs/reliability.md."""
    rows = []
    for surface, (cases, attempt) in SURFACES.items():
        outcomes = []
        for index, case in enumerate(cases()):
            work = folder / f"{surface.split()[1]}-{index}"
            work.mkdir(parents=True)
            outcomes.append(attempt(case, work))
        tracebacks = sum(o.crashed or "Traceback" in o.output for o in outcomes)
        for o in outcomes:
            if not o.clean:
                print(
                    f"  not clean: {surface}: {o.case.name}: {o.output[-300:]!r}", file=sys.stderr
                )
        rows.append((surface, len(outcomes), sum(o.clean for o in outcomes), tracebacks))
    return rows


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        print(
            "| surface | inputs tried | clean answers (exit 2 + `field: reason`, or valid) | tracebacks |"
        )
        print("|---|---:|---:|---:|")
        for surface, tried, clean, tracebacks in table(Path(scratch)):
            print(f"| `{surface}` | {tried} | {clean} | {tracebacks} |")


@pytest.mark.spark
def test_run_of_a_union_whose_branches_differ_is_a_field_error_not_a_traceback(
    tmp_path: Path,
) -> None:
    """Only compiling against the source's schema finds it (Spark starts, then stops)."""
    job = yaml.safe_load((ROOT / "examples" / "diamond" / "streamjob.yaml").read_text())
    operators = {op["name"]: op for op in job["spec"]["dataflow"]["operators"]}
    operators["large"]["function"] = "swivel.jobs.examples.fraud:parse"  # other columns
    operators["large"].pop("params")
    path = tmp_path / "job.yaml"
    path.write_bytes(dump(job))
    code, output, crashed = _invoke(run, [str(path), "--workdir", str(tmp_path / "work")])
    assert (code, crashed) == (2, False), output
    assert "Traceback" not in output
    assert re.search(
        r"^error: .*job\.yaml: spec\.dataflow\.operators\[merge\]\.inputs\[1\]: ", output, re.M
    ), output
    assert "merge merges inputs whose columns differ" in output


def test_plan_refuses_a_reference_naming_the_allow_list_in_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWIVEL_FUNCTION_PREFIXES", "acme.functions,swivel.jobs.examples")
    reconf = yaml.safe_load((FRAUD / "reconfiguration.yaml").read_text())
    reconf["spec"]["functionUpdates"][0]["function"] = "swivel.jobs.examples.fraud:pd.read_pickle"
    path = tmp_path / "reconf.yaml"
    path.write_bytes(dump(reconf))
    code, output, crashed = _invoke(plan, [str(path), "--job", str(FRAUD / "streamjob.yaml")])
    assert (code, crashed) == (2, False)
    assert output.splitlines() == [
        "error: spec.functionUpdates[0].function: "
        "'swivel.jobs.examples.fraud:pd.read_pickle' reaches 'pd', which is not a class defined "
        "in module 'swivel.jobs.examples.fraud'; allowed: functions defined in modules under "
        "[acme.functions, swivel.jobs.examples] (SWIVEL_FUNCTION_PREFIXES), or entry points of "
        "group 'swivel.functions' [none installed]"
    ]
