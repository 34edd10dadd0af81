"""The operator follows an agent's plan by long-poll (issue 12): each step reads the plan,
then asks again with the `revision` it saw and a wait, instead of a plain read every
`intervals.reconfiguration`. Real kopf on the sandbox; the fake agent records the reads."""

from __future__ import annotations

import itertools

from swivel.operator.reconfiguration_steps import PLAN_WAIT_S
from tests.integration.operator.conftest import Harness


def _recon(h: Harness, name: str) -> None:
    body = h.example("reconfiguration.yaml")
    body["metadata"] = {"name": name}
    h.create("reconfigurations", body)


def test_a_plan_is_followed_with_the_last_revision_seen_and_a_wait(harness: Harness) -> None:
    h = harness
    h.link.revisions, h.link.completion_polls = True, 3
    h.job()
    _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Completed")
    reads = h.link.plan_reads
    assert reads[0][1:3] == (None, 0.0)  # the plan as it is now: no revision seen yet
    long_polls = [(since, timeout) for _, since, timeout, _ in reads if since is not None]
    assert long_polls and all(timeout == PLAN_WAIT_S for _, timeout in long_polls)
    for before, after in itertools.pairwise(reads):
        if after[1] is not None:  # a long-poll asks with the revision the read before got
            assert after[1] == before[3]


def test_an_agent_without_revisions_is_read_at_once_as_before(harness: Harness) -> None:
    h = harness
    h.link.completion_polls = 2
    h.job()
    _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Completed")
    assert all(since is None and timeout == 0.0 for _, since, timeout, _ in h.link.plan_reads)
