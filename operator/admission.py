"""What the operator checks at admission beyond the models: the bounds of the readers
downstream of it, and executors a Reconfiguration's moves name.

The API server admits a `params` object of any depth and integers of any size (the CRD
declares `params` free-form). What the operator passes on is read again later, by readers
with bounds of their own: the driver and the agent load the rendered StreamJob with the
manifest loader (`swivel.api.manifests.MAX_DEPTH` levels from the document root) and the
agent reads a submitted Reconfiguration as a wire document (`swivel.protocol.documents`: 32
levels from the body's root, integers within 64 bits). Without this check such a spec is accepted
here and fails there: a driver that crash-loops on its own configuration, or an agent's 400
that names `body` instead of the field. With it, the user gets `field: reason` on the object.

The walk is iterative: a hostile document never makes the operator recurse.

A job name is any DNS subdomain to the API server, but the driver's Service takes the
job's name and a Service name must be a DNS-1035 label: a job named `a.b` or `2001-12-25`
(a date to YAML 1.1, a string in the JSON the server stores) would be admitted and then
fail at every reconcile on a real cluster (the sandbox does not check Service names).

A move to an executor the job does not have passes the models (an executor id is any
string) and would reach the driver, which learns only at its next batch that nothing can
take the bins; the operator knows the job's executors (its status) and says so at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from swivel.api.errors import FieldProblem
from swivel.api.manifests import MAX_DEPTH as MANIFEST_DEPTH
from swivel.api.reconfiguration import ReconfigurationSpec
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.planning import assumed_assignment, executor_ids_after_rescale
from swivel.operator.naming import Names

AGENT_DEPTH = 32  # swivel/protocol/documents.py MAX_DEPTH: levels from the submitted body's root
INT_LIMIT = 1 << 63  # the agent's and the API server's integers are 64-bit

# `spec` is the second level of both documents (the manifest's root mapping, the agent's
# body `{name, spec, ...}`), so these are the depths the spec itself may reach.
STREAMJOB_SPEC_DEPTH = MANIFEST_DEPTH - 1
RECONFIGURATION_SPEC_DEPTH = AGENT_DEPTH - 1
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def service_name_problem(job: str) -> FieldProblem | None:
    """`metadata.name` when the driver Service's name would not be a DNS-1035 label."""
    service = Names(job).service
    if _DNS_1035_LABEL.fullmatch(service):
        return None
    reason = (
        f"the driver Service {service[:80]!r} must be a DNS-1035 label (lowercase letters, "
        "digits and '-', starting with a letter, no dots): rename the job"
    )
    return FieldProblem("metadata.name", reason)


def spec_bound_problem(spec: Any, limit: int, where: str = "spec") -> FieldProblem | None:
    """The first place in `spec` nested more than `limit` levels deep (`spec` itself is
    level 1) or holding an integer outside 64 bits, as a field problem; None if none."""
    stack: list[tuple[Any, str, int]] = [(spec, where, 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, bool):
            continue
        if isinstance(node, int) and not -INT_LIMIT <= node < INT_LIMIT:
            return FieldProblem(
                path, "an integer outside 64 bits (the agent and the API server refuse it)"
            )
        if isinstance(node, dict):
            children = [(v, f"{path}.{k}", depth + 1) for k, v in node.items()]
        elif isinstance(node, list):
            children = [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node)]
        else:
            continue
        if depth > limit:
            return FieldProblem(_short(path), f"nested deeper than {limit} levels")
        stack.extend(reversed(children))
    return None


def _short(path: str) -> str:
    """The path down to the level where the bound was crossed is enough to find the field;
    the full path of a 2 000-deep value is not a message anyone reads."""
    return path if len(path) <= 200 else f"{path[:200]}..."


def unknown_targets(
    spec: ReconfigurationSpec, job: StreamJobSpec, status: Mapping[str, Any] | None
) -> list[FieldProblem]:
    """Each move whose `to` is not an executor of the job: one it runs now (its status:
    `binsPerExecutor`, the ids `0..executors-1` Spark gives), or one the same
    Reconfiguration's rescale adds. Lenient where unsure: a false refusal would block a
    valid move, a missed one only fails later at the driver."""
    if not spec.moves:
        return []
    status = status or {}
    observed = status.get("binsPerExecutor")
    count = status.get("executors")
    executors = count if isinstance(count, int) and count > 0 else job.executor.instances
    known = {str(i) for i in range(executors)}
    if isinstance(observed, Mapping):
        known |= {str(e) for e in observed}
    if spec.rescale is not None:
        current = assumed_assignment(job.dataflow.bins, executors)
        known |= set(executor_ids_after_rescale(current, spec.rescale.executors))
    listed = ", ".join(sorted(known, key=lambda e: (len(e), e)))
    return [
        FieldProblem(
            f"spec.moves[{i}].to", f"the job has no executor {move.to!r} (executors: {listed})"
        )
        for i, move in enumerate(spec.moves)
        if move.to not in known
    ]
