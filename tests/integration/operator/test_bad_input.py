"""Bad input through the operator surface: every malformed StreamJob, Reconfiguration and
illegal edit a user can apply is refused at admission by the CRD schema (with the field) or
reaches the real kopf operator and ends in a clean error: a Failed phase (or, for a job
that does not exist, a waiting condition) whose message names the field, an Event, no
traceback in the operator's log, nothing sent to the agent, and the running job in the same
namespace untouched (issue 11 §3, §5). The corpus: `bad_input_corpus.py`.

All cases go in at once against one operator (the sandbox API server, `TestingAgentLink`),
so the operator also sees them concurrently; each must be settled within `BOUND_S`.

`.venv/bin/python -m tests.integration.operator.test_bad_input` (from the repository root)
prints the table docs/reliability.md quotes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from swivel.operator.images import ALLOWED_ENV
from swivel_tools.sandbox import SandboxThread
from tests.fakes_agent import TestingAgentLink
from tests.integration.operator.bad_input_corpus import SENTINEL, Case, cases, encode
from tests.integration.operator.conftest import GROUP, VERSION, Harness
from tests.integration.sandboxing import install_crds, sandbox_client
from tests.polling import PollTimeoutError, wait_for

BOUND_S = 60.0  # every reached case settled within this, from the last request
READY_S = 30.0
LOGGERS = ("kopf", "swivel", "aiohttp", "asyncio")
ALLOWED_IMAGES = "ghcr.io/swivel-dev"  # an installation with an image policy


@dataclass
class Outcome:
    """What became of one case. `verdict`: refused (by the API server, with `detail` the
    fields it named), clean (the operator's answer), valid, unclean (with why), hung."""

    case: Case
    object_name: str
    verdict: str = "pending"
    detail: str = ""
    tracebacks: list[str] = field(default_factory=list)
    pod_uid: str | None = None  # an edited job's running driver pod, which must stay

    @property
    def clean(self) -> bool:
        return self.verdict in ("refused", "undecodable", "clean", "valid") and not self.tracebacks


class Tracebacks(logging.Handler):
    """Every record that carries a traceback, from any logger the operator uses."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.records.append(record)

    def __enter__(self) -> Tracebacks:
        for name in LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *_: object) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self)


def _request(h: Harness, method: str, path: str, body: bytes, content_type: str) -> Any:
    return h.api.rest_client.pool_manager.request(
        method,
        h.api.configuration.host + path,
        body=body,
        headers={"Content-Type": content_type, "Authorization": "Bearer sandbox"},
    )


def _path(h: Harness, plural: str, name: str = "") -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{h.namespace}/{plural}"
    return f"{base}/{name}" if name else base


def _send(h: Harness, outcome: Outcome) -> None:
    """The request; a refusal is settled at once (its verdict and the fields it named)."""
    case = outcome.case
    if case.target == "edit":
        body = encode(case.document(outcome.object_name, SENTINEL))
        path = _path(h, "streamjobs", outcome.object_name)
        response = _request(h, "PATCH", path, body, "application/merge-patch+json")
    else:
        body = encode(case.document(outcome.object_name, SENTINEL))
        response = _request(h, "POST", _path(h, case.target), body, "application/json")
    if response.status < 300:
        return
    try:
        status = json.loads(response.data)
    except ValueError:
        status = {"message": response.data[:200].decode("utf-8", "replace")}
    causes = [c.get("field", "") for c in (status.get("details") or {}).get("causes") or []]
    named = ", ".join(causes) or (status.get("message") or "")[:160]
    outcome.detail = f"{response.status} {named}"
    text = " ".join(causes) + " " + str(status.get("message") or "")
    if response.status >= 500:
        outcome.verdict = "unclean"
        outcome.detail = f"server error: {outcome.detail}"
    elif response.status == 400:  # not JSON the server decodes: no field to name
        outcome.verdict = "undecodable"
    elif case.field and case.field not in text:
        outcome.verdict = "unclean"
        outcome.detail = f"refused without naming {case.field}: {outcome.detail}"
    else:
        outcome.verdict = "refused"


def _events(h: Harness) -> dict[str, list[Any]]:
    by_object: dict[str, list[Any]] = {}
    for event in h.core.list_namespaced_event(h.namespace).items:
        by_object.setdefault(event.involved_object.name, []).append(event)
    return by_object


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == type_:
            found: dict[str, Any] = condition
            return found
    return {}


def _judge(
    h: Harness, outcome: Outcome, events: dict[str, list[Any]], pods: dict[str, str]
) -> None:
    """Settle a case that reached the operator, or leave it pending."""
    case, name = outcome.case, outcome.object_name
    plural = "reconfigurations" if case.target == "reconfigurations" else "streamjobs"
    obj = h.get(plural, name) or {}
    status = obj.get("status") or {}
    phase, message = status.get("phase"), status.get("message") or ""
    reasons = {e.reason: e for e in events.get(name, [])}
    if plural == "reconfigurations":
        failed = _condition(obj, "Failed")
        waiting = _condition(obj, "Succeeded")
        if phase == "Failed":
            message = failed.get("message") or ""
            event = reasons.get(failed.get("reason") or "")
        elif phase == "Pending" and waiting.get("reason") == "JobNotFound":
            message = waiting.get("message") or ""
            event = reasons.get("JobNotFound")
        elif phase in ("Planned", "Applying", "Completed"):
            outcome.verdict, outcome.detail = "unclean", f"accepted: {phase}"
            return
        else:
            return
        if event is None:
            return  # the Event is posted asynchronously
        _named(outcome, message, f"{phase}, Event {event.reason}")
        return
    if case.valid:
        if _condition(obj, "Ready") and f"{name}-driver" in pods:
            outcome.verdict, outcome.detail = "valid", f"handled: {status.get('phase')}"
        return
    if phase != "Failed" or not message:
        return  # the health timer may write Failed before the handler's message lands
    # The handler's Warning Event carries `field: reason` (the timer's says `Ready=False`).
    events_ = [e for e in events.get(name, []) if e.reason in ("ImageRefused", "InvalidSpec")]
    event = next((e for e in events_ if (e.message or "") == message), None)
    if event is None:
        return
    if case.target == "edit":
        if pods.get(f"{name}-driver") != outcome.pod_uid:
            outcome.verdict, outcome.detail = "unclean", "the running driver pod was replaced"
            return
    elif f"{name}-driver" in pods:
        outcome.verdict, outcome.detail = "unclean", "a driver pod was started"
        return
    _named(outcome, message, f"Failed, Event {event.reason}")


def _named(outcome: Outcome, message: str, how: str) -> None:
    """Clean when the message names the case's field (`field: reason`, or the field inside
    a message that leads with another, such as `StreamJob x is invalid: field: ...`)."""
    field_ = outcome.case.field
    if field_ and field_ not in message:
        outcome.verdict = "unclean"
        outcome.detail = f"{how}; message does not name {field_}: {message[:200]}"
        return
    outcome.verdict, outcome.detail = "clean", f"{how}: {message[:200]}"


def _pods(h: Harness) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in h.core.list_namespaced_pod(h.namespace).items}


def _ready(h: Harness, name: str) -> bool:
    obj = h.get("streamjobs", name) or {}
    return _condition(obj, "Ready").get("status") == "True"


def _start_job(h: Harness, name: str) -> None:
    body = h.example("streamjob.yaml")
    body["metadata"] = {"name": name}
    h.create("streamjobs", body)


def _snapshot(h: Harness) -> dict[str, Any]:
    """What must not change on the sentinel: its pod, phase, Ready, live configuration."""
    obj = h.get("streamjobs", SENTINEL) or {}
    status = obj.get("status") or {}
    return {
        "pod": _pods(h).get(f"{SENTINEL}-driver"),
        "phase": status.get("phase"),
        "ready": _condition(obj, "Ready").get("status"),
        "liveGeneration": status.get("liveGeneration"),
        "operators": status.get("operators"),
        "plans": [p.id for p in h.link.plans_of(SENTINEL)],
        "generation": obj.get("metadata", {}).get("generation"),
    }


def run_corpus(
    h: Harness, corpus: list[Case], bound: float = BOUND_S
) -> tuple[list[Outcome], list[str], float]:
    """Every case against the operator `h` runs; the outcomes, the problems outside any case
    (the sentinel touched, tracebacks of no case), and the seconds from the first request
    until all were settled."""
    outcomes = [
        Outcome(c, f"edit-{i:03d}" if c.target == "edit" else f"bad-{i:03d}")
        for i, c in enumerate(corpus)
    ]
    for outcome in outcomes:  # a case about the name brings its own
        named = (outcome.case.body.get("metadata") or {}).get("name")
        if outcome.case.target != "edit" and isinstance(named, str):
            outcome.object_name = named
    edits = [o for o in outcomes if o.case.target == "edit"]
    for name in [SENTINEL, *(o.object_name for o in edits)]:
        _start_job(h, name)
    for name in [SENTINEL, *(o.object_name for o in edits)]:
        h.run_driver(name)
    for name in [SENTINEL, *(o.object_name for o in edits)]:
        wait_for(lambda n=name: _ready(h, n), READY_S, f"{name} Ready")
    pods = _pods(h)
    for outcome in edits:
        outcome.pod_uid = pods[f"{outcome.object_name}-driver"]
    before = _snapshot(h)
    started = time.monotonic()
    with Tracebacks() as tracebacks:
        for outcome in outcomes:
            _send(h, outcome)

        def all_judged() -> bool:
            pending = [o for o in outcomes if o.verdict == "pending"]
            if pending:
                events, pods = _events(h), _pods(h)
                for outcome in pending:
                    _judge(h, outcome, events, pods)
            return not pending

        with contextlib.suppress(PollTimeoutError):  # what is still pending is judged hung
            wait_for(all_judged, bound, "a verdict on every input", every=0.2)
        elapsed = time.monotonic() - started
        time.sleep(1.0)  # a traceback logged just after the last status write
        for outcome in outcomes:
            if outcome.verdict == "pending":
                outcome.verdict, outcome.detail = "hung", _last_seen(h, outcome, bound)
        problems = _attribute(tracebacks.records, outcomes)
    after = _snapshot(h)
    if before != after:
        problems.append(f"the sentinel changed: {before} -> {after}")
    return outcomes, problems, elapsed


def _last_seen(h: Harness, outcome: Outcome, bound: float) -> str:
    """Where a case that did not settle stands: its phase, message and Events."""
    plural = "reconfigurations" if outcome.case.target == "reconfigurations" else "streamjobs"
    status = (h.get(plural, outcome.object_name) or {}).get("status") or {}
    events = sorted({e.reason for e in _events(h).get(outcome.object_name, [])})
    return (
        f"not settled within {bound:.0f} s: phase {status.get('phase')}, "
        f"message {str(status.get('message'))[:160]!r}, Events {events}"
    )


def _attribute(records: list[logging.LogRecord], outcomes: list[Outcome]) -> list[str]:
    by_name = {o.object_name: o for o in outcomes}
    stray: list[str] = []
    for record in records:
        ref = getattr(record, "k8s_ref", None) or {}
        text = record.getMessage()
        owner = by_name.get(ref.get("name", "")) or next(
            (o for n, o in by_name.items() if n in text), None
        )
        line = f"{record.name}: {text[:300]}"
        if owner is None:
            stray.append(f"traceback of no case: {line}")
        else:
            owner.tracebacks.append(line)
    return stray


def table(outcomes: list[Outcome]) -> dict[str, int]:
    counts = Counter(o.verdict if not o.tracebacks else "traceback" for o in outcomes)
    return {
        "inputs": len(outcomes),
        "refused by the CRD schema (422)": counts["refused"],
        "refused as not JSON (400)": counts["undecodable"],
        "clean errors from the operator": counts["clean"] + counts["valid"],
        "tracebacks": counts["traceback"],
        "unclean": counts["unclean"],
        "hung": counts["hung"],
    }


def _harness(api: client.ApiClient, url: str) -> Harness:
    namespace = f"bad-{secrets.token_hex(3)}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    h = Harness(api=api, namespace=namespace, server=url, link=TestingAgentLink())
    h.start()
    return h


@pytest.fixture
def image_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWED_ENV, ALLOWED_IMAGES)


def test_every_bad_input_is_refused_or_a_clean_error_and_the_running_job_is_untouched(
    harness: Harness, image_policy: None
) -> None:
    outcomes, problems, elapsed = run_corpus(harness, cases())
    bad = [
        f"{o.case.target} {o.case.name!r}: {o.verdict}: {o.detail} {o.tracebacks}"
        for o in outcomes
        if not o.clean
    ]
    print(f"\noperator bad input: {table(outcomes)}, all settled in {elapsed:.1f} s")
    assert bad == [] and problems == [], "\n".join([*bad, *problems])
    assert len(outcomes) >= 60


def main() -> None:
    import os

    os.environ[ALLOWED_ENV] = ALLOWED_IMAGES
    verbose = "-v" in sys.argv
    only = [a for a in sys.argv[1:] if not a.startswith("-")]  # substrings of case names
    corpus = [c for c in cases() if not only or any(o in c.name for o in only)]
    running = SandboxThread(bookmark_interval=1.0).start()
    api = sandbox_client(running.url, token="sandbox")
    try:
        install_crds(api)
        h = _harness(api, running.url)
        try:
            outcomes, problems, elapsed = run_corpus(
                h, corpus, float(os.environ.get("BOUND", BOUND_S))
            )
        finally:
            h.stop()
    finally:
        api.close()
        running.close()
    for o in outcomes:
        if verbose or not o.clean:
            print(f"{o.verdict:9} {o.case.target:16} {o.case.name:40} {o.detail} {o.tracebacks}")
    for problem in problems:
        print(problem)
    print(json.dumps(table(outcomes)), f"settled in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
