"""What the agent refuses before it touches the running job (422 with the field)."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.submissions import PlanRejected, parse_submission

COUNTING = "swivel.jobs.examples.probes:counting"
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


@pytest.mark.parametrize("scheduler", ["fries"])
def test_a_live_switch_above_a_split_is_refused_naming_the_update(scheduler: str) -> None:
    with pytest.raises(PlanRejected) as refused:
        parse_submission(body("parse", scheduler), SPLIT_JOB, "split")
    assert refused.value.status == 422
    (problem,) = refused.value.problems
    assert problem.field == "spec.functionUpdates[0].operator"
    assert "once per branch" in problem.reason and "epoch" in problem.reason


def test_the_naive_override_is_refused_there_too() -> None:
    naive = {**body("parse", "fries"), "schedulerOverride": "naive"}
    with pytest.raises(PlanRejected):
        parse_submission(naive, SPLIT_JOB, "split")


@pytest.mark.parametrize(
    ("operator", "scheduler"), [("parse", "epoch"), ("parse", "restart"), ("by-customer", "fries")]
)
def test_boundary_switches_and_operators_below_the_split_are_accepted(
    operator: str, scheduler: str
) -> None:
    submission = parse_submission(body(operator, scheduler), SPLIT_JOB, "split")
    assert submission.scheduler == scheduler


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
