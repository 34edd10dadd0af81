"""`swivel plan`: the JSON contract, the human view, and bad input (exit 2, field named)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from swivel.cli.plan import command as plan

ROOT = Path(__file__).resolve().parents[3]
FRAUD = ROOT / "examples" / "fraud-detection"


def run_plan(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(plan, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def plan_json(reconf: Path, job: Path, *extra: str) -> dict[str, Any]:
    code, out, err = run_plan(reconf, "--job", job, "--output", "json", *extra)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_fraud_swap_model_is_one_component_headed_by_the_customer_detector() -> None:
    document = plan_json(FRAUD / "reconfiguration.yaml", FRAUD / "streamjob.yaml")
    assert document["kind"] == "live-control" and document["scheduler"] == "fries"
    assert document["components"] == [
        {
            "operators": ["customer-detector", "merchant-detector", "combine"],
            "heads": ["customer-detector"],
            "edges": [["customer-detector", "merchant-detector"], ["merchant-detector", "combine"]],
            "targets": ["customer-detector", "combine"],
        }
    ]
    # parse(2) -hash-> customer(16) -hash-> merchant(16) -fwd-> combine(16) -fwd-> alerts(16)
    # plus payments(2) -fwd-> parse(2): 2 + 32 + 256 + 16 + 16 channels; the MCS has 256 + 16.
    assert document["channels"] == {"total": 322, "mcs": 272}
    assert document["migration"] is None


def test_rescale_plans_a_meta_topology_and_batched_steps() -> None:
    document = plan_json(FRAUD / "rescale.yaml", FRAUD / "streamjob.yaml")
    assert document["kind"] == "live-migration" and document["components"] == []
    migration = document["migration"]
    assert migration["strategy"] == "batched"
    hand_overs = [h for step in migration["steps"] for h in step.get("handOver", [])]
    moved = [b for h in hand_overs for b in h["bins"]]
    assert len(moved) == 5  # 16 bins over 3 executors: 6/5/5, so 5 bins move to executor 2
    assert {h["to"] for h in hand_overs} == {"2"}
    assert {h["from"] for h in hand_overs} == {"0", "1"}  # both givers hand over
    per_step = [sum(len(h["bins"]) for h in s.get("handOver", [])) for s in migration["steps"]]
    assert all(n <= 2 for n in per_step)
    assert any(step.get("gap") for step in migration["steps"])


def test_a_dry_run_plans_from_the_placement_it_is_given(tmp_path: Path) -> None:
    """`--placement`: the plan the agent makes from the driver's placement (the same call)."""
    placement = ["0"] * 12 + ["1"] * 4  # executor 0 holds 12 of the 16 bins
    document = plan_json(
        FRAUD / "rescale.yaml", FRAUD / "streamjob.yaml", "--placement", json.dumps(placement)
    )
    migration = document["migration"]
    assert migration["initial"] == placement
    hand_overs = [h for step in migration["steps"] for h in step.get("handOver", [])]
    assert {h["from"] for h in hand_overs} == {"0"}  # only the loaded executor gives
    (tmp_path / "placement.json").write_text(json.dumps(dict(enumerate(placement))))
    again = plan_json(
        FRAUD / "rescale.yaml", FRAUD / "streamjob.yaml", "--placement", tmp_path / "placement.json"
    )
    assert again["migration"] == migration
    code, _, err = run_plan(
        FRAUD / "rescale.yaml", "--job", FRAUD / "streamjob.yaml", "--placement", '["0"]'
    )
    assert code != 0 and "--placement" in err


def paper_job(tmp_path: Path) -> Path:
    """Fries W4 (Table 6): src -> RE (replicate) -> {FD3 -> S1 -> F3, F4 -> FD4} -> SJ -> E1."""
    operators = [
        {"name": "src", "kind": "source"},
        {"name": "RE", "kind": "replicate", "inputs": ["src"]},
        {"name": "FD3", "inputs": ["RE"]},
        {"name": "S1", "inputs": ["FD3"]},
        {"name": "F3", "inputs": ["S1"]},
        {"name": "F4", "inputs": ["RE"]},
        {"name": "FD4", "inputs": ["F4"]},
        {"name": "SJ", "kind": "join", "inputs": ["F3", "FD4"], "uniquePerRecord": True},
        {"name": "E1", "inputs": ["SJ"]},
        {"name": "out", "kind": "sink", "inputs": ["E1"]},
    ]
    path = tmp_path / "w4.yaml"
    path.write_text(
        yaml.safe_dump({"kind": "StreamJob", "spec": {"dataflow": {"operators": operators}}})
    )
    return path


def reconf_file(tmp_path: Path, *operators: str) -> Path:
    path = tmp_path / "r.yaml"
    updates = [{"operator": op, "params": {"v": 2}} for op in operators]
    path.write_text(
        yaml.safe_dump(
            {
                "kind": "Reconfiguration",
                "spec": {"jobRef": {"name": "w4"}, "functionUpdates": updates},
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("targets", "with_pruning", "without_pruning"),
    [
        (("FD4",), {"FD4"}, {"RE", "F4", "FD4"}),
        (("F3",), {"F3"}, {"RE", "FD3", "S1", "F3"}),
        (("F4",), {"F4"}, {"RE", "F4"}),
        (("FD3", "FD4"), {"RE", "FD3", "F4", "FD4"}, {"RE", "FD3", "F4", "FD4"}),
        (("E1",), {"E1"}, {"RE", "FD3", "S1", "F3", "F4", "FD4", "SJ", "E1"}),
    ],
)
def test_fries_table_6_through_the_command_line(
    tmp_path: Path, targets: tuple[str, ...], with_pruning: set[str], without_pruning: set[str]
) -> None:
    job, reconf = paper_job(tmp_path), reconf_file(tmp_path, *targets)
    for extra, expected in (((), with_pruning), (("--no-pruning",), without_pruning)):
        document = plan_json(reconf, job, *extra)
        operators = {op for component in document["components"] for op in component["operators"]}
        assert operators == expected, (targets, extra)


def test_human_output_names_heads_and_channels() -> None:
    code, out, _ = run_plan(FRAUD / "reconfiguration.yaml", "--job", FRAUD / "streamjob.yaml")
    assert code == 0
    assert "heads customer-detector" in out and "272 of 322" in out


def test_plan_never_imports_the_functions_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An allowed package that is not installed here (the job's image may carry it): the
    # admission check reads sources, never imports, and defers to the workers.
    monkeypatch.setenv(
        "SWIVEL_FUNCTION_PREFIXES", "swivel.jobs.examples,module_that_does_not_exist"
    )
    job = yaml.safe_load((FRAUD / "streamjob.yaml").read_text())
    job["spec"]["dataflow"]["operators"][2]["function"] = "module_that_does_not_exist:explode"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    document = plan_json(FRAUD / "reconfiguration.yaml", path)
    assert document["components"][0]["heads"] == ["customer-detector"]
    assert "module_that_does_not_exist" not in sys.modules


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda r, j: r["spec"]["functionUpdates"][0].update(operator="ghost"),
            "spec.functionUpdates[0].operator: the job has no operator 'ghost'",
        ),
        (
            lambda r, j: j["spec"]["dataflow"].update(bins=12),
            "spec.dataflow.bins: must be a power of two (got 12)",
        ),
        (
            lambda r, j: r["spec"].update(functionUpdates=[]),
            "spec.functionUpdates: an empty reconfiguration",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_field(tmp_path: Path, mutate: Any, message: str) -> None:
    reconf = yaml.safe_load((FRAUD / "reconfiguration.yaml").read_text())
    job = yaml.safe_load((FRAUD / "streamjob.yaml").read_text())
    mutate(reconf, job)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(reconf))
    (tmp_path / "j.yaml").write_text(yaml.safe_dump(job))
    code, out, err = run_plan(tmp_path / "r.yaml", "--job", tmp_path / "j.yaml")
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


def test_the_console_script_runs_from_a_subprocess() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "swivel",
            "plan",
            str(FRAUD / "reconfiguration.yaml"),
            "--job",
            str(FRAUD / "streamjob.yaml"),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["channels"]["mcs"] == 272
