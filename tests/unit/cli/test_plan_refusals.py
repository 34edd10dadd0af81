"""`swivel plan` on issue 10's fan-out: the Fries MCS for every DAG, what Spark cannot carry
out consistently (exit 2, one `field: reason` line each) and the scheduler to use instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from swivel.cli.plan import command as plan
from tests.unit.agent.test_intake import issue_10_body, issue_10_job

ROOT = Path(__file__).resolve().parents[3]
FRAUD = ROOT / "examples" / "fraud-detection"


def files(tmp_path: Path, scheduler: str, **shape: str) -> tuple[Path, Path]:
    job = {
        "kind": "StreamJob",
        "metadata": {"name": "fanout"},
        "spec": issue_10_job(**shape).model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
    reconf = {"kind": "Reconfiguration", "metadata": {"name": "r"}}
    reconf["spec"] = issue_10_body(scheduler)["spec"]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(reconf))
    return tmp_path / "r.yaml", tmp_path / "job.yaml"


def run(reconf: Path, job: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(plan, [str(reconf), "--job", str(job), *extra])
    return result.exit_code, result.stdout, result.stderr


def test_issue_10_is_refused_under_fries_with_the_field_and_the_suggestion(
    tmp_path: Path,
) -> None:
    code, out, err = run(*files(tmp_path, "fries"))
    assert code == 2
    assert "heads parse switch on the control message" in out
    assert "refused under fries" in out and "suggested scheduler: epoch" in out
    lines = err.splitlines()
    assert lines[0].startswith("error: spec.scheduler: fries would switch at 'parse'")
    assert lines[-1].endswith("suggested scheduler: epoch")
    assert "Traceback" not in err


def test_the_json_carries_refused_and_the_suggested_scheduler(tmp_path: Path) -> None:
    code, out, _ = run(*files(tmp_path, "fries"), "--output", "json")
    assert code == 2
    document: dict[str, Any] = json.loads(out)
    assert [r["field"] for r in document["refused"]] == ["spec.scheduler"]
    assert document["suggestedScheduler"] == "epoch"
    assert document["components"][0]["heads"] == ["parse"]
    assert document["seeds"] == ["parse", "s1", "s2", "det"]


def test_epoch_is_consistent_there_and_fries_is_not_suggested(tmp_path: Path) -> None:
    code, out, err = run(*files(tmp_path, "epoch"), "--output", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["refused"] == [] and document["suggestedScheduler"] == "epoch"


def test_a_fan_out_and_merge_in_one_pass_is_live(tmp_path: Path) -> None:
    """s1 stateless: parse, s1, s2 and u run in one mapInPandas pass (no split), so parse
    can head the component and fries is consistent."""
    code, out, err = run(*files(tmp_path, "fries", s1="map"), "--output", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["refused"] == [] and document["suggestedScheduler"] == "fries"
    assert document["components"][0]["heads"] == ["parse"]


def test_pruned_ancestors_are_printed_with_their_rule(tmp_path: Path) -> None:
    reconf, job = files(tmp_path, "fries", s1="map")
    body = yaml.safe_load(reconf.read_text())
    body["spec"]["functionUpdates"] = [{"operator": "s1", "params": {}}]
    reconf.write_text(yaml.safe_dump(body))
    code, out, _ = run(reconf, job)
    assert code == 0
    assert "pruned one-to-many ancestor parse (edge-wise-one-to-one rule)" in out
    assert "suggested scheduler: fries" in out


def test_the_fraud_example_suggests_fries() -> None:
    code, out, _ = run(FRAUD / "reconfiguration.yaml", FRAUD / "streamjob.yaml", "-o", "json")
    assert code == 0
    document = json.loads(out)
    assert document["refused"] == [] and document["suggestedScheduler"] == "fries"
