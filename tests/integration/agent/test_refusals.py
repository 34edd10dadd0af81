"""Issue 10 §1 over HTTP: a fries plan Spark cannot carry out consistently is a 422 naming
the field, and nothing is published: the configuration, the transition and the plans the
workers and the driver can see stay as they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swivel.api.streamjob import StreamJob
from tests.unit.agent.test_intake import issue_10_body, issue_10_job

from .conftest import AgentServer, register


def test_the_fan_out_of_issue_10_is_422_on_spec_scheduler_and_nothing_is_published(
    tmp_path: Path, call: Any
) -> None:
    job = StreamJob.model_validate(
        {"metadata": {"name": "fanout"}, "spec": issue_10_job().model_dump(by_alias=True)}
    )
    agent = AgentServer(job, tmp_path / "state")
    try:
        register(agent.url, 1)
        before = call(agent.url + "/v1/control/watch?pid=1&timeout=0")
        status, answer, _ = call(agent.url + "/v1/plans", "POST", issue_10_body("fries"))
        assert status == 422
        (error,) = answer["errors"]
        assert error["field"] == "spec.scheduler"
        assert "'parse'" in error["reason"] and "epoch" in error["reason"]
        config = call(agent.url + "/v1/config")[1]
        assert config["configVersion"] == 1 and config["transition"] is None
        assert config.get("activePlan") is None
        after = call(agent.url + "/v1/control/watch?pid=1&timeout=0")
        assert after[0] in (200, 304) and after[1] == before[1]
        # The consistent scheduler the plan suggests is accepted.
        status, accepted, _ = call(agent.url + "/v1/plans", "POST", issue_10_body("epoch"))
        assert status == 202 and accepted["scheduler"] == "epoch"
    finally:
        agent.stop()
