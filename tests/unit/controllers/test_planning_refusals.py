"""`refusals` and `suggested_scheduler`: what Spark cannot carry out consistently, decided
once for the CLI, the agent and the operator (issue 10 §1)."""

from __future__ import annotations

import pytest

from swivel.api.reconfiguration import ReconfigurationSpec, Scheduler
from swivel.controllers.planning import (
    Refusal,
    codeless_operators,
    plan_reconfiguration,
    refusals,
    suggested_scheduler,
)
from tests.unit.agent.test_intake import issue_10_body, issue_10_job

UPDATES = ("s1", "s2", "det")
COMPONENTS = [(("parse",), UPDATES)]


def test_a_fries_head_run_once_per_branch_is_refused_on_the_scheduler() -> None:
    (refusal,) = refusals(
        "fries", UPDATES, COMPONENTS, per_branch={"payments", "parse"}, codeless=()
    )
    assert refusal.field == "spec.scheduler"
    assert "'parse'" in refusal.reason and "['det', 's1', 's2']" in refusal.reason


def test_a_head_that_is_a_target_is_refused_on_its_update() -> None:
    (refusal,) = refusals(
        "fries", ("x", "parse"), [(("parse",), ("parse",))], per_branch={"parse"}, codeless=()
    )
    assert refusal.field == "spec.functionUpdates[1].operator"


def test_a_head_that_runs_no_code_is_refused() -> None:
    (refusal,) = refusals(
        "fries", ("a", "b"), [(("src",), ("a", "b"))], per_branch=(), codeless={"src"}
    )
    assert refusal.field == "spec.scheduler" and "no function" in refusal.reason


def test_naive_is_refused_per_target_and_boundary_schedulers_never() -> None:
    naive = refusals("naive", ("a", "b"), [], per_branch={"b"}, codeless=())
    assert naive == [Refusal("spec.functionUpdates[1].operator", naive[0].reason)]
    for scheduler in ("epoch", "restart"):
        assert refusals(scheduler, UPDATES, COMPONENTS, per_branch={"parse"}, codeless=()) == []


def test_heads_heading_two_components_are_refused_once_each() -> None:
    found = refusals(
        "fries", UPDATES, [(("p",), ("s1",)), (("p",), ("s1",))], per_branch={"p"}, codeless=()
    )
    assert len(found) == 1


def test_the_suggestion_is_fries_unless_fries_is_refused() -> None:
    assert suggested_scheduler([]) is Scheduler.FRIES
    assert suggested_scheduler([Refusal("spec.scheduler", "x")]) is Scheduler.EPOCH


@pytest.mark.parametrize(
    ("scheduler", "refused", "suggested"),
    [("fries", ["spec.scheduler"], "epoch"), ("epoch", [], "epoch"), ("restart", [], "epoch")],
)
def test_the_plan_of_issue_10(scheduler: str, refused: list[str], suggested: str) -> None:
    spec = ReconfigurationSpec.model_validate(issue_10_body(scheduler)["spec"])
    plan = plan_reconfiguration(issue_10_job(), spec, per_branch={"payments", "parse"})
    document = plan.to_dict()
    assert [r["field"] for r in document["refused"]] == refused
    assert document["suggestedScheduler"] == suggested
    # By default the planner reads the compiled shape's per-branch operators itself.
    assert plan_reconfiguration(issue_10_job(), spec).refused == plan.refused
    # Without those facts nothing is refused for a split (the source is no head).
    assert plan_reconfiguration(issue_10_job(), spec, per_branch=()).refused == ()


def test_only_the_kinds_the_runtime_runs_without_code_are_codeless() -> None:
    assert codeless_operators(issue_10_job()) == {"payments", "u", "out"}
