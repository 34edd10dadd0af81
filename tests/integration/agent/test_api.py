"""The agent's HTTP contract: auth, refusals that leave the job alone, views, OpenAPI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from swivel.jobs.agent.app import OPENAPI_PATH, ROUTES, create_app
from tests.polling import wait_for

from .conftest import register


def test_health_needs_no_token_but_everything_else_does(agent: Any, call: Any) -> None:
    assert call(agent.url + "/healthz", token=None)[0] == 200
    status, body, headers = call(agent.url + "/v1/config", token=None)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert body["errors"][0]["reason"] == "missing bearer token"
    status, body, headers = call(agent.url + "/v1/config", token="wrong")
    assert status == 401 and body["errors"][0]["reason"] == "invalid bearer token"
    assert "WWW-Authenticate" in headers
    for path in ("/metrics", "/v1/topology", "/openapi.yaml", "/v1/control/watch?timeout=0"):
        assert call(agent.url + path, token=None)[0] == 401, path


def test_ready_once_the_driver_reported_progress(agent: Any, call: Any) -> None:
    assert call(agent.url + "/readyz", token=None)[0] == 503
    progress = {"batchId": 0, "event": "started", "at": 1.0}
    assert call(agent.url + "/v1/driver/progress", "POST", progress)[0] == 202
    assert call(agent.url + "/readyz", token=None)[0] == 200


def test_malformed_plans_are_400_with_the_field(agent: Any, call: Any, swap_model: Any) -> None:
    url = agent.url + "/v1/plans"
    status, body, _ = call(url, "POST", raw=b"{not json")
    assert status == 400 and body["errors"][0]["field"] == "body"
    bad = swap_model()
    bad["spec"]["scheduler"] = "sometimes"
    del bad["name"]
    status, body, _ = call(url, "POST", bad)
    assert status == 400
    fields = {e["field"] for e in body["errors"]}
    assert {"name", "spec.scheduler"} <= fields
    status, body, _ = call(url, "POST", {"name": "x", "spec": {"jobRef": {"name": "j"}}})
    assert status == 400 and body["errors"][0]["field"] == "spec.functionUpdates"
    assert call(agent.url + "/v1/config")[1]["configVersion"] == 1


def test_unknown_operator_is_422_and_nothing_changes(
    agent: Any, call: Any, swap_model: Any
) -> None:
    body = swap_model()
    body["spec"]["functionUpdates"][1]["operator"] = "no-such-op"
    status, answer, _ = call(agent.url + "/v1/plans", "POST", body)
    assert status == 422
    assert answer["errors"][0]["field"] == "spec.functionUpdates[1].operator"
    assert "no-such-op" in answer["errors"][0]["reason"]
    other_job = swap_model()
    other_job["spec"]["jobRef"]["name"] = "another-job"
    assert call(agent.url + "/v1/plans", "POST", other_job)[0] == 422
    config = call(agent.url + "/v1/config")[1]
    assert config["configVersion"] == 1 and config["transition"] is None


def test_a_second_plan_is_409_naming_the_running_one(
    agent: Any, call: Any, swap_model: Any
) -> None:
    status, first, headers = call(agent.url + "/v1/plans", "POST", swap_model("first"))
    assert status == 202 and first["phase"] == "Applying"
    assert headers["Location"] == f"/v1/plans/{first['id']}"
    status, second, _ = call(agent.url + "/v1/plans", "POST", swap_model("second"))
    assert status == 409
    assert second["runningPlan"] == first["id"]
    assert first["id"] in second["errors"][0]["reason"]
    config = call(agent.url + "/v1/config")[1]
    assert config["configVersion"] == 2 and config["activePlan"] == first["id"]


def test_accepted_plan_publishes_the_new_configuration(
    agent: Any, call: Any, swap_model: Any
) -> None:
    status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
    assert status == 202
    assert plan["plan"]["components"][0]["heads"] == ["customer-detector"]
    config = call(agent.url + "/v1/config")[1]
    operators = config["operators"]
    assert operators["customer-detector"]["version"] == 2
    assert operators["customer-detector"]["params"] == {"model": "cheap"}
    assert operators["combine"] == {
        "function": "swivel.jobs.examples.fraud:combine",
        "params": {"rule": "both"},
        "version": 2,
        "stateTransform": None,
    }
    assert operators["merchant-detector"]["version"] == 1
    transition = config["transition"]
    assert transition["scheduler"] == "fries"
    assert transition["previous"]["customer-detector"]["params"] == {
        "model": "expensive",
        "threshold": 0.8,
    }
    assert transition["components"] == [
        {
            "id": 0,
            "heads": ["customer-detector"],
            "operators": ["customer-detector", "merchant-detector", "combine"],
        }
    ]
    assert call(agent.url + "/v1/plans/nope")[0] == 404


def test_restart_scheduler_sends_a_driver_action(agent: Any, call: Any, swap_model: Any) -> None:
    assert call(agent.url + "/v1/driver/actions?since=0&timeout=0")[0] == 304
    assert call(agent.url + "/v1/plans", "POST", swap_model(scheduler="restart"))[0] == 202
    action = call(agent.url + "/v1/driver/actions?since=0&timeout=1")[1]
    assert action == {"seq": 1, "action": "restart", "configVersion": 2}
    assert call(agent.url + "/v1/driver/actions?since=1&timeout=0")[0] == 304


def test_epoch_scheduler_applies_from_the_next_batch(
    agent: Any, call: Any, swap_model: Any
) -> None:
    call(agent.url + "/v1/driver/progress", "POST", {"batchId": 40, "event": "completed"})
    call(agent.url + "/v1/driver/progress", "POST", {"batchId": 41, "event": "started"})
    call(agent.url + "/v1/plans", "POST", swap_model(scheduler="epoch"))
    transition = call(agent.url + "/v1/config")[1]["transition"]
    assert transition["scheduler"] == "epoch" and transition["applyFromBatch"] == 42
    assert transition["components"] == []


def test_topology_lists_operators_and_watching_workers(agent: Any, call: Any) -> None:
    register(agent.url, 4242, "parse,combine")
    topology = call(agent.url + "/v1/topology")[1]
    assert topology["job"] == "fraud-detection" and topology["bins"] == 16
    assert [op["name"] for op in topology["operators"]][:2] == ["payments", "parse"]
    assert topology["workers"][0]["pid"] == 4242
    assert topology["workers"][0]["operators"] == ["combine", "parse"]


def test_bad_control_and_driver_input_is_400(agent: Any, call: Any) -> None:
    assert call(agent.url + "/v1/control/watch?since=x")[0] == 400
    assert call(agent.url + "/v1/control/acks", "POST", {"pid": 1})[0] == 400
    assert (
        call(agent.url + "/v1/control/acks", "POST", [{"pid": 1}])[1]["errors"][0]["field"]
        == "[0].operator"
    )
    assert call(agent.url + "/v1/driver/progress", "POST", {"batchId": "x"})[0] == 400


def test_a_bad_ack_field_is_400_naming_it_and_nothing_of_the_body_applies(
    agent: Any, call: Any, swap_model: Any
) -> None:
    plan = call(agent.url + "/v1/plans", "POST", swap_model())[1]
    good = {"pid": 11, "operator": "customer-detector", "version": 2, "configVersion": 2}
    for bad, field in (({"at": "x"}, "[1].at"), ({"kind": "done"}, "[1].kind"),
                       ({"batchId": "7"}, "[1].batchId")):  # fmt: skip
        status, answer, _ = call(agent.url + "/v1/control/acks", "POST", [good, {**good, **bad}])
        assert status == 400 and [e["field"] for e in answer["errors"]] == [field]
    progress = call(f"{agent.url}/v1/plans/{plan['id']}")[1]["progress"]
    assert progress["operators"]["customer-detector"]["switched"] == 0
    assert 11 not in {w["pid"] for w in call(agent.url + "/v1/topology")[1]["workers"]}


def test_metrics_are_exposed(agent: Any, call: Any, swap_model: Any) -> None:
    call(agent.url + "/v1/plans", "POST", swap_model())
    acks = [
        {"pid": 7, "operator": op, "version": 2, "configVersion": 2}
        for op in ("combine", "customer-detector")
    ]
    register(agent.url, 7)
    call(agent.url + "/v1/control/acks", "POST", acks)
    status, text, headers = call(agent.url + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert 'swivel_plans_total{outcome="accepted"} 1.0' in text
    assert "swivel_acks_received_total 2.0" in text
    assert 'swivel_plans_total{outcome="completed"} 1.0' in text
    assert "swivel_control_messages_sent_total" in text
    assert "swivel_workers_registered" in text
    assert 'swivel_reconfiguration_delay_seconds_count{scheduler="fries"} 1.0' in text


def _documented_routes(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }


def test_openapi_documents_every_route_and_nothing_else(agent: Any, call: Any) -> None:
    document = yaml.safe_load(Path(OPENAPI_PATH).read_text(encoding="utf-8"))
    served = {(method, path) for method, path, _, _ in ROUTES}
    assert _documented_routes(document) == served
    app = create_app(agent.hub, "another-token")
    router = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    assert router == served
    status, text, _ = call(agent.url + "/openapi.yaml")
    assert status == 200 and yaml.safe_load(text) == document


def test_a_repeated_idempotency_key_gets_the_same_plan_even_after_a_restart(
    start_agent: Any, call: Any, swap_model: Any
) -> None:
    """The operator's double-apply window: a plan accepted, then finished, before the
    submitter learnt its id; the repeat (same key) must not plan and apply it again."""
    agent = start_agent()
    body = {**swap_model(), "idempotencyKey": "streams/swap-model/0b9f6a3e"}
    status, first, headers = call(agent.url + "/v1/plans", "POST", body)
    assert status == 202
    status, again, headers = call(agent.url + "/v1/plans", "POST", body)
    assert (status, again["id"]) == (200, first["id"])  # not 409 busy, not a second plan
    assert headers["Location"] == f"/v1/plans/{first['id']}"
    acks = [
        {"pid": 7, "operator": op, "version": 2, "configVersion": 2}
        for op in ("customer-detector", "combine")
    ]
    register(agent.url, 7)
    assert call(agent.url + "/v1/control/acks", "POST", acks)[0] == 202
    done = wait_for_phase(call, agent.url, first["id"], "Completed")
    agent.stop()
    restarted = start_agent()  # same state directory: the key is durable
    status, repeat, _ = call(restarted.url + "/v1/plans", "POST", body)
    assert (status, repeat["id"], repeat["phase"]) == (200, first["id"], "Completed")
    assert repeat["configVersion"] == done["configVersion"] == 2
    assert call(restarted.url + "/v1/config")[1]["configVersion"] == 2  # applied once
    # Another key (another Reconfiguration) is a new plan as usual; no key: as before.
    other = {**swap_model("other"), "idempotencyKey": "streams/other/1c2d"}
    status, second, _ = call(restarted.url + "/v1/plans", "POST", other)
    assert status in (202, 409)
    if status == 202:
        assert second["id"] != first["id"]
    bad = {**swap_model(), "idempotencyKey": ""}
    status, errors, _ = call(restarted.url + "/v1/plans", "POST", bad)
    assert (status, errors["errors"][0]["field"]) == (400, "idempotencyKey")


def wait_for_phase(call: Any, url: str, plan_id: str, phase: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        plan = call(f"{url}/v1/plans/{plan_id}")[1]
        return dict(plan) if plan["phase"] == phase else None

    return wait_for(reached, 10, f"plan {plan_id} {phase}")
