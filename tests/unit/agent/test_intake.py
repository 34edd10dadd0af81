"""What the agent refuses before it touches the running job (422 with the field)."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.intake import PlanRejected, parse_submission

COUNTING = "swivel.jobs.testing.probes:counting"
PARSE = "swivel.jobs.examples.fraud:parse"

# parse feeds two keyed operators whose outputs meet only at the sink: Spark evaluates
# parse once per branch (a split, docs/runtime.md).
SPLIT_JOB = StreamJobSpec.model_validate(
    {
        "source": {"kind": "generator"},
        "dataflow": {
            "bins": 4,
            "operators": [
                {"name": "payments", "kind": "source"},
                {"name": "parse", "inputs": ["payments"], "function": PARSE},
                {"name": "by-customer", "kind": "keyed", "key": "customer",
                 "inputs": ["parse"], "function": COUNTING},
                {"name": "by-merchant", "kind": "keyed", "key": "merchant",
                 "inputs": ["parse"], "function": COUNTING},
                {"name": "out", "kind": "sink", "inputs": ["by-customer", "by-merchant"]},
            ],
        },
    }
)  # fmt: skip


def body(operator: str, scheduler: str) -> dict[str, Any]:
    return {
        "name": "swap",
        "spec": {
            "jobRef": {"name": "split"},
            "scheduler": scheduler,
            "functionUpdates": [{"operator": operator, "params": {"x": "1"}}],
        },
    }


def test_a_live_switch_above_a_split_is_refused_naming_the_update() -> None:
    agent = Hub(SPLIT_JOB, "split")
    with pytest.raises(PlanRejected) as refused:
        agent.submit(body("parse", "fries"))
    assert refused.value.status == 422
    (problem,) = refused.value.problems
    assert problem.field == "spec.functionUpdates[0].operator"
    assert "once per branch" in problem.reason and "epoch" in problem.reason
    assert agent.snapshot.config_version == 1 and agent.active_plan is None


def test_the_naive_override_is_refused_there_too() -> None:
    naive = {**body("parse", "fries"), "schedulerOverride": "naive"}
    with pytest.raises(PlanRejected) as refused:
        Hub(SPLIT_JOB, "split").submit(naive)
    assert refused.value.problems[0].field == "spec.functionUpdates[0].operator"


@pytest.mark.parametrize(
    ("operator", "scheduler"), [("parse", "epoch"), ("parse", "restart"), ("by-customer", "fries")]
)
def test_boundary_switches_and_operators_below_the_split_are_accepted(
    operator: str, scheduler: str
) -> None:
    """by-customer under fries: parse fans out, but only its edge to by-customer leads to
    the target, so the edge-wise rule prunes it and by-customer heads alone."""
    submission = parse_submission(body(operator, scheduler), SPLIT_JOB, "split")
    assert submission.scheduler == scheduler
    assert Hub(SPLIT_JOB, "split").submit(body(operator, scheduler)).to_config_version == 2


# fm (one-to-many) feeds a keyed and a stateless branch that meet again at a union: Spark
# runs fm once per branch. Updating t makes fm a Fries head although fm is no target.
HEAD_SPLIT_JOB = StreamJobSpec.model_validate(
    {
        "source": {"kind": "generator"},
        "dataflow": {
            "bins": 4,
            "operators": [
                {"name": "src", "kind": "source"},
                {"name": "fm", "kind": "flatMap", "inputs": ["src"], "function": PARSE},
                {"name": "k", "kind": "keyed", "key": "customer",
                 "inputs": [{"from": "fm", "partitioning": "hash", "key": "customer"}],
                 "function": COUNTING},
                {"name": "a", "inputs": ["fm"], "function": PARSE},
                {"name": "u", "kind": "union",
                 "inputs": [{"from": "k", "partitioning": "hash", "key": "customer"},
                            {"from": "a", "partitioning": "hash", "key": "customer"}]},
                {"name": "t", "inputs": ["u"], "function": PARSE},
                {"name": "out", "kind": "sink", "inputs": ["t"]},
            ],
        },
    }
)  # fmt: skip


def test_a_fries_head_above_a_split_is_refused_even_when_it_is_no_target() -> None:
    agent = Hub(HEAD_SPLIT_JOB, "split")
    with pytest.raises(PlanRejected) as refused:
        agent.submit(body("t", "fries"))
    assert refused.value.status == 422
    (problem,) = refused.value.problems
    assert problem.field == "spec.scheduler"
    assert "'fm'" in problem.reason and "once per branch" in problem.reason
    assert agent.snapshot.config_version == 1 and agent.active_plan is None


def test_the_same_update_under_epoch_is_accepted() -> None:
    agent = Hub(HEAD_SPLIT_JOB, "split")
    assert agent.submit(body("t", "epoch")).to_config_version == 2


def test_the_naive_override_is_judged_as_naive_by_the_one_plan() -> None:
    """The plan's refusals are those of the scheduler that runs it: naive switches t on its
    own, and t runs once (below the union), so nothing is refused where fries is."""
    naive = {**body("t", "fries"), "schedulerOverride": "naive"}
    record = Hub(HEAD_SPLIT_JOB, "split").submit(naive)
    assert record.scheduler == "naive" and record.plan["refused"] == []


def issue_10_job(fan_out_from: str = "parse", s1: str = "keyed") -> StreamJobSpec:
    """Issue 10: payments -> parse -> {s1 (keyed), s2} -> u -> det (keyed) -> out. With
    `fan_out_from="payments"` the source itself feeds both branches (no parse)."""
    keyed = s1 == "keyed"
    s1_kind = {"kind": "keyed", "key": "customer"} if keyed else {"kind": s1}
    # Hash edges where a keyed operator needs them; forward ones keep s1, s2 and u in one
    # mapInPandas pass (no split) when s1 is stateless.
    hashed = {"partitioning": "hash" if keyed else "forward", "key": "customer"}
    first = [{"name": "payments", "kind": "source"}]
    if fan_out_from == "parse":
        first.append({"name": "parse", "inputs": ["payments"], "function": PARSE})
    return StreamJobSpec.model_validate(
        {
            "source": {"kind": "generator"},
            "dataflow": {
                "bins": 4,
                "operators": [
                    *first,
                    {"name": "s1", **s1_kind, "inputs": [{"from": fan_out_from, **hashed}],
                     "function": COUNTING if s1 == "keyed" else PARSE},
                    {"name": "s2", "inputs": [fan_out_from], "function": PARSE},
                    {"name": "u", "kind": "union",
                     "inputs": [{"from": "s1", **hashed}, {"from": "s2", **hashed}]},
                    {"name": "det", "kind": "keyed", "key": "customer",
                     "inputs": [{"from": "u", "partitioning": "hash", "key": "customer"}],
                     "function": COUNTING},
                    {"name": "out", "kind": "sink", "inputs": ["det"]},
                ],
            },
        }
    )  # fmt: skip


def issue_10_body(scheduler: str) -> dict[str, Any]:
    updates = [{"operator": name, "params": {"x": "1"}} for name in ("s1", "s2", "det")]
    spec = {"jobRef": {"name": "fanout"}, "scheduler": scheduler, "functionUpdates": updates}
    return {"name": "swap", "spec": spec}


def test_the_fan_out_of_issue_10_is_refused_at_its_head_and_nothing_is_published() -> None:
    """parse copies each payment to s1 and s2 (Def. 5.2), so parse heads the component;
    s1 is keyed, so Spark runs parse once per branch: fries cannot be consistent."""
    agent = Hub(issue_10_job(), "fanout")
    with pytest.raises(PlanRejected) as refused:
        agent.submit(issue_10_body("fries"))
    assert refused.value.status == 422
    (problem,) = refused.value.problems
    assert problem.field == "spec.scheduler"
    assert "'parse'" in problem.reason and "once per branch" in problem.reason
    assert agent.snapshot.config_version == 1 and agent.active_plan is None
    assert agent.snapshot.transition is None
    assert agent.submit(issue_10_body("epoch")).to_config_version == 2


def test_a_head_that_runs_no_code_is_refused() -> None:
    """The source feeds both (stateless, so no split) branches: it would head them, and it
    runs no code that could stamp a tag."""
    agent = Hub(issue_10_job(fan_out_from="payments", s1="map"), "fanout")
    with pytest.raises(PlanRejected) as refused:
        agent.submit(issue_10_body("fries"))
    (problem,) = refused.value.problems
    assert problem.field == "spec.scheduler"
    assert "'payments'" in problem.reason and "no function" in problem.reason
    assert agent.snapshot.config_version == 1
