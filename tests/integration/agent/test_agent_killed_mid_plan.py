"""The agent SIGKILLed while a plan is in flight, restarted on the same state directory
(issue 11 §5): the plan resumes and is followed to completion when the workers ack again,
or it fails visibly (a terminal phase with a message); it is never lost, stuck or applied
twice.

Each round runs `swivel agent` as a real process and drives one Fries plan the way the
operator and a worker do over HTTP: the worker enrols and watches (registers, hosting the
plan's two targets), the operator submits with an idempotency key, the worker acks each target. The
agent is killed with SIGKILL at a seeded random point of that sequence, either between two
requests or while one is in flight (a few milliseconds after it was sent: the request may or
may not have been applied and made durable). Then a new agent starts on the same state
directory, and the callers do what theirs do after a lost connection: the operator submits
again with the same key (the plan back, 200, if it was accepted; else a new plan, 202), the
worker watches again (enrolling anew, with its pid, when the new agent does not know it) and
re-sends its acks. Checked per round: the plan reaches a terminal
phase within seconds (Completed, or Failed with a message), it is the only plan of that key,
and the configuration moved exactly one version per round (none lost, none applied twice).

`test_agent_killed_mid_plan_few` (5 rounds) runs in `make test`; the `slow` variant runs 40
(`SWIVEL_AGENT_KILLS=N` for more, `SWIVEL_AGENT_KILL_SEED` to vary the kill points); `-s`
prints the outcomes recorded in docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from swivel.jobs.agent.auth import Role, role_token
from swivel.jobs.control.identity import WORKER_SECRET_HEADER
from tests.polling import wait_for

from .conftest import http

ROOT = Path(__file__).resolve().parents[3]
JOB = ROOT / "examples/fraud-detection/streamjob.yaml"
TOKEN = "kill-mid-plan-token"
WORKER = role_token(TOKEN, Role.WORKER)
PID = 4242
TARGETS = ("customer-detector", "combine")
STEPS = ("submit", "ack customer-detector", "ack combine", "poll")
TERMINAL = ("Completed", "Failed")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class AgentProcess:
    """`swivel agent` on a free port and the given state directory."""

    def __init__(self, state: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWIVEL_AGENT_")}
        env["SWIVEL_AGENT_TOKEN"] = TOKEN
        command = [sys.executable, "-m", "swivel", "agent", "--job", str(JOB),
                   "--port", str(self.port), "--state-dir", str(state)]  # fmt: skip
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wait_for(self._accepting, 30, "the agent to start", ignoring=(OSError,))

    def _accepting(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(self._stderr())
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
            return True

    def _stderr(self) -> str:
        return self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        if self.process.stderr is not None:
            self.process.stderr.close()

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(10)
        output = self._stderr()
        if self.process.stderr is not None:
            self.process.stderr.close()
        return output


def _body(round_: int) -> dict[str, Any]:
    return {
        "name": f"swap-{round_}",
        "idempotencyKey": f"streams/swap-{round_}/uid-{round_}",
        "spec": {
            "jobRef": {"name": "fraud-detection"},
            "scheduler": "fries",
            "functionUpdates": [
                {
                    "operator": "customer-detector",
                    "params": {"model": "cheap" if round_ % 2 else "expensive"},
                },
                {"operator": "combine", "params": {"rule": "both" if round_ % 2 else "any"}},
            ],
        },
    }


class Worker:
    """The worker's side, as its control client does it: enrol for an id and a secret, watch
    and ack with them, enrol again when the agent no longer knows the id (a restart)."""

    def __init__(self) -> None:
        self.id, self.secret = PID, ""

    def _watch(self, url: str) -> int:
        operators = ",".join(TARGETS)
        watch = f"{url}/v1/control/watch?pid={self.id}&operators={operators}&timeout=0"
        return http(watch, token=WORKER, headers={WORKER_SECRET_HEADER: self.secret})[0]

    def register(self, url: str) -> None:
        status = self._watch(url) if self.secret else 409
        if status == 409:  # not known to this agent (a new process): enrol, get the id back
            enrolment = {"pid": PID}
            status, answer, _ = http(f"{url}/v1/control/workers", "POST", enrolment, token=WORKER)
            assert (status, answer["pid"]) == (201, PID), (status, answer)
            self.secret = answer["secret"]
            status = self._watch(url)
        assert status in (200, 304), status

    def ack(self, url: str, ack: dict[str, Any]) -> tuple[int, Any]:
        headers = {WORKER_SECRET_HEADER: self.secret}
        status, body, _ = http(
            f"{url}/v1/control/acks", "POST", [ack], token=WORKER, headers=headers
        )
        return status, body


class Round:
    """One plan driven by the operator and one worker, resumable on a new agent."""

    def __init__(self, number: int, worker: Worker) -> None:
        self.number = number
        self.plan_id: str | None = None
        self.worker = worker

    def register(self, url: str) -> None:
        self.worker.register(url)

    def submit(self, url: str) -> int:
        status, plan, _ = http(f"{url}/v1/plans", "POST", _body(self.number), token=TOKEN)
        assert status in (200, 202), (status, plan)
        assert self.plan_id in (None, plan["id"]), "the same key got another plan"
        self.plan_id = plan["id"]
        return status

    def ack(self, url: str, operator: str) -> None:
        status, config, _ = http(f"{url}/v1/config", token=TOKEN)
        assert status == 200
        ack = {
            "pid": PID,
            "operator": operator,
            "version": config["operators"][operator]["version"],
            "configVersion": config["configVersion"],
        }
        status, body = self.worker.ack(url, ack)
        assert status == 202, (status, body)

    def phase(self, url: str) -> dict[str, Any]:
        assert self.plan_id is not None
        status, plan, _ = http(f"{url}/v1/plans/{self.plan_id}", token=TOKEN)
        assert status == 200, (status, plan)  # never lost: the restarted agent knows it
        return dict(plan)

    def step(self, url: str, index: int) -> None:
        if index == 0:
            self.submit(url)
        elif index in (1, 2):
            self.ack(url, TARGETS[index - 1])
        else:
            self.phase(url)


def _in_flight(round_: Round, url: str, index: int) -> None:
    """The step's request, whose connection the kill may cut (any answer or none)."""
    with contextlib.suppress(OSError, AssertionError):
        round_.step(url, index)


def _wait_terminal(round_: Round, url: str, timeout_s: float = 15.0) -> dict[str, Any]:
    def terminal() -> dict[str, Any] | None:
        plan = round_.phase(url)
        return plan if plan["phase"] in TERMINAL else None

    return wait_for(terminal, timeout_s, f"plan of round {round_.number} terminal")


def run_kills(tmp_path: Path, rounds: int, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    state = tmp_path / "state"
    outcomes: Counter[str] = Counter()
    agent = AgentProcess(state)
    worker = Worker()
    try:
        for number in range(rounds):
            round_ = Round(number, worker)
            round_.register(agent.url)
            kill_at = rng.randrange(len(STEPS))
            in_flight = rng.random() < 0.5
            for index in range(kill_at):
                round_.step(agent.url, index)
            if in_flight:
                thread = threading.Thread(target=_in_flight, args=(round_, agent.url, kill_at))
                thread.start()
                time.sleep(rng.uniform(0.0, 0.01))
            agent.kill()
            if in_flight:
                thread.join(15)
            agent = AgentProcess(state)
            # the callers after a lost connection: resubmit with the key, watch, ack again
            status = round_.submit(agent.url)
            at_restart = round_.phase(agent.url)["phase"]
            round_.register(agent.url)
            for operator in TARGETS:
                round_.ack(agent.url, operator)
            plan = _wait_terminal(round_, agent.url)
            assert plan["phase"] == "Completed" or plan.get("message"), plan
            where = f"{'during' if in_flight else 'before'} {STEPS[kill_at]}"
            resumed = f"resumed {at_restart}" if status == 200 else "not accepted, submitted anew"
            outcomes[f"{where}: {resumed} -> {plan['phase']}"] += 1
            outcomes[plan["phase"]] += 1
            config = http(f"{agent.url}/v1/config", token=TOKEN)[1]
            # exactly one configuration version per round: none lost, none applied twice
            assert config["configVersion"] == 2 + number, (number, config["configVersion"])
            assert config["activePlan"] is None, config
    finally:
        agent.stop()
    print(
        f"\nagent killed mid-plan, {rounds} kills (seed {seed}): {dict(sorted(outcomes.items()))}"
    )
    return outcomes


def test_agent_killed_mid_plan_few(tmp_path: Path) -> None:
    seed = int(os.environ.get("SWIVEL_AGENT_KILL_SEED", "11"))
    outcomes = run_kills(tmp_path, 5, seed)
    assert outcomes["Completed"] + outcomes["Failed"] == 5


@pytest.mark.slow
def test_agent_killed_mid_plan_many(tmp_path: Path) -> None:
    seed = int(os.environ.get("SWIVEL_AGENT_KILL_SEED", "12"))
    rounds = int(os.environ.get("SWIVEL_AGENT_KILLS", "40"))
    outcomes = run_kills(tmp_path, rounds, seed)
    assert outcomes["Completed"] + outcomes["Failed"] == rounds
