"""Worker acknowledgements (`POST /v1/control/acks`, docs/control-protocol.md).

The control client in every Python worker (`swivel.jobs.control.client`) posts a JSON array
of acks; `parse_acks` validates the whole body against `swivel.protocol.acks.Ack` before
the hub applies any of it, so a bad field is a 400 naming it (`[2].kind`) and never half a
body applied. Numbers are strict, as in `swivel.protocol.loads`: a JSON number, not a
boolean or a numeric string. `implausible` then checks the acks against what the agent
knows (422): the job's operators and their published versions, the registered workers,
the batches the driver reported, the agent's clock. Every worker holds the same
credential, so a worker's code can still claim another worker's switch; it cannot name an
operator, a version or a batch that does not exist (a batch id far ahead would hold every
later epoch plan back), nor a worker that never long-polled.

A body may also be an object (`swivel.protocol.acks.AckReport`): acks and the worker's
counts (rows and busy time per operator and partition, `swivel.protocol.counts`), which
`parse_report` reads with the acks. Counts are monitoring, not control: an entry that cannot
be true of this job (`implausible_counts`: an operator it lacks, a keyed operator's
partition beyond its bins -- a reused Python worker may still hold counts of an earlier
query) is dropped (`plausible_counts`) and the acks beside it still apply; only a worker
the agent does not know (409, retry) holds the body back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from swivel.api.errors import FieldProblem, problems_from
from swivel.protocol.acks import MAX_ACKS, Ack, AckReport
from swivel.protocol.counts import WorkerCounts

MAX_BATCH_LEAD = 8  # an ack's batch may be this far ahead of the driver's last report
MAX_CLOCK_SKEW_S = 86_400.0  # an ack's `at` further from the agent's clock is garbage


_ACKS = TypeAdapter(list[Ack])


class AcksRejected(ValueError):  # noqa: N818 - reads as the outcome, like LoadsRejected
    def __init__(self, problems: list[FieldProblem], status: int = 400) -> None:
        self.problems, self.status = problems, status
        super().__init__("; ".join(str(p) for p in problems))


def parse_acks(body: Any) -> list[Ack]:
    """The acks of a body, or AcksRejected naming each bad field (`[i].field`; `body` when
    it is not an array at all)."""
    if not isinstance(body, list):
        raise AcksRejected([FieldProblem("body", "expected a JSON array of acks")])
    if len(body) > MAX_ACKS:
        raise AcksRejected([FieldProblem("body", f"at most {MAX_ACKS} acks in one body")])
    try:
        return _ACKS.validate_python(body)
    except ValidationError as error:
        raise AcksRejected(problems_from(error)) from None


def parse_report(body: Any) -> tuple[list[Ack], list[WorkerCounts]]:
    """The acks and counts of a body: a JSON array of acks, or an `AckReport` object;
    AcksRejected naming each bad field (`[i].field`, `acks[i].field`, `counts[i].field`)."""
    if isinstance(body, list):
        return parse_acks(body), []
    if not isinstance(body, dict):
        reason = "expected a JSON array of acks or an object with acks and counts"
        raise AcksRejected([FieldProblem("body", reason)])
    try:
        report = AckReport.model_validate(body)
    except ValidationError as error:
        raise AcksRejected(problems_from(error)) from None
    return report.acks, report.counts


def implausible_counts(
    counts: list[WorkerCounts],
    *,
    keyed: Mapping[str, bool],
    bins: int,
    registered: Callable[[int], bool],
) -> list[FieldProblem]:
    """Why counts cannot be true (`counts[i].field: reason`), empty when they may be.

    `keyed`: each operator of the job, and whether it is keyed (its partitions are bins)."""
    problems = []
    for i, report in enumerate(counts):
        if not registered(report.pid):
            reason = "no worker with this pid long-polls GET /v1/control/watch; watch first"
            problems.append(FieldProblem(f"counts[{i}].pid", reason))
        for j, entry in enumerate(report.partitions):
            where = f"counts[{i}].partitions[{j}]"
            is_keyed = keyed.get(entry.operator)
            if is_keyed is None:
                problems.append(FieldProblem(f"{where}.operator", "not an operator of this job"))
            elif is_keyed and entry.partition >= bins:
                reason = f"not a bin of this job (its bins are 0..{bins - 1})"
                problems.append(FieldProblem(f"{where}.partition", reason))
    return problems


def plausible_counts(
    counts: list[WorkerCounts], *, keyed: Mapping[str, bool], bins: int
) -> list[WorkerCounts]:
    """`counts` without the entries `implausible_counts` names (a report keeps its `seq`)."""

    def true(operator: str, partition: int) -> bool:
        is_keyed = keyed.get(operator)
        return is_keyed is not None and (not is_keyed or partition < bins)

    return [
        report.model_copy(
            update={"partitions": [p for p in report.partitions if true(p.operator, p.partition)]}
        )
        for report in counts
    ]


def implausible(
    acks: list[Ack],
    *,
    versions: Mapping[str, int],
    config_version: int,
    registered: Callable[[int], bool],
    latest_batch: int | None,
    now: float,
) -> list[FieldProblem]:
    """Why acks cannot be true (`[i].field: reason`), empty when they may be.

    `versions`: each operator's published function version; `latest_batch`: the last batch
    the driver reported (None before any: counted as 0)."""
    problems = []
    for i, ack in enumerate(acks):
        published = versions.get(ack.operator)
        if published is None:
            problems.append(FieldProblem(f"[{i}].operator", "not an operator of this job"))
        elif ack.version > published:
            reason = f"{ack.operator!r} is at function version {published}; no later one exists"
            problems.append(FieldProblem(f"[{i}].version", reason))
        if ack.config_version is not None and ack.config_version > config_version:
            reason = f"the agent's configuration is at version {config_version}"
            problems.append(FieldProblem(f"[{i}].configVersion", reason))
        if not registered(ack.pid):
            reason = "no worker with this pid long-polls GET /v1/control/watch; watch first"
            problems.append(FieldProblem(f"[{i}].pid", reason))
        if ack.batch_id is not None and ack.batch_id > (latest_batch or 0) + MAX_BATCH_LEAD:
            last = "none yet" if latest_batch is None else latest_batch
            reason = f"the driver's last batch is {last}; this one has not run (retry later)"
            problems.append(FieldProblem(f"[{i}].batchId", reason))
        if ack.at is not None and not now - MAX_CLOCK_SKEW_S <= ack.at <= now + MAX_CLOCK_SKEW_S:
            reason = f"the worker's time {ack.at:.3f} is not within a day of the agent's {now:.3f}"
            problems.append(FieldProblem(f"[{i}].at", reason))
    return problems


TRANSIENT_FIELDS = (".pid", ".batchId")  # true once the worker watched / the driver reported


def transient(problems: list[FieldProblem]) -> bool:
    """Whether every problem may clear by itself (answered 409: retry), not a lie (422)."""
    return all(p.field.endswith(TRANSIENT_FIELDS) for p in problems)
