"""What a driver restart keeps, when a spec edit needs one, and when one is refused.

A graceful restart stops the query at a batch boundary and resumes it from its checkpoint.
By default that checkpoint lives on a PersistentVolumeClaim the job owns, which outlives
the driver pod; the pod carries the hash of the spec fields a running driver cannot take
live (`restart_hash`), so a changed hash means a restart. A memory-sink query cannot be
resumed at all, so such a restart is refused rather than silently starting over.
"""

from __future__ import annotations

import hashlib
import json

from swivel.api.base import API_GROUP
from swivel.api.streamjob import SinkKind, StreamJob, StreamJobSpec
from swivel.operator.naming import Manifest, Names, Owner, child_metadata

STATE_DIR = "/var/lib/swivel"  # the pod's emptyDir: agent state (and a memory sink's checkpoint)
CHECKPOINT_ROOT = f"{STATE_DIR}/checkpoints"
CHECKPOINT_VOLUME = "checkpoints"
RESTART_HASH_ANNOTATION = f"{API_GROUP}/restart-hash"
SINK_ANNOTATION = f"{API_GROUP}/sink"  # on the driver pod: the sink kind its query writes to


def uses_checkpoint_claim(job: StreamJob) -> bool:
    """The default checkpoint lives on the job's claim; an explicit location is the user's.

    Not for a `memory` sink: its rows live in the driver's memory and die with it, and Spark
    refuses to resume such a query from a checkpoint ("does not support recovering"), so a
    kept checkpoint would only make the restarted driver fail; it stays on the pod's volume.
    """
    return job.spec.checkpoint.location is None and job.spec.sink.kind is not SinkKind.MEMORY


def restart_refusal(running_sink: str | None, job: StreamJob) -> str | None:
    """Why the driver pod (whose query writes to `running_sink`, None when unknown) must not
    be replaced by one for `job`; None when a graceful restart is safe.

    A graceful restart stops the query at a batch boundary and resumes it from its
    checkpoint. A memory-sink query cannot be resumed (Spark refuses in append mode, the
    only one the runtime uses, so it gets no claim above): with a memory sink on either
    side, a restart can only start over, losing the keyed state of the stateful operators,
    the offsets and the rows. The operator refuses that instead of doing it silently;
    deleting and re-creating the job starts over on purpose.
    """
    memory = SinkKind.MEMORY.value
    if running_sink != memory and job.spec.sink.kind is not SinkKind.MEMORY:
        return None
    which = "the running query writes to" if running_sink == memory else "the new spec has"
    return (
        f"restart refused: {which} a memory sink, which Spark cannot resume from a "
        "checkpoint, so the restarted query would start over (keyed state, offsets and rows "
        "lost); the driver keeps running the previous spec. Use a files/kafka/noop/console "
        "sink for jobs that must survive restarts, or delete and re-create the job"
    )


def render_checkpoint_claim(job: StreamJob, owner: Owner) -> Manifest:
    """The PersistentVolumeClaim under CHECKPOINT_ROOT: outlives the driver pod (a restart
    resumes from it), collected with the job. ReadWriteOnce: one driver mounts it at a time,
    so the old driver must be gone before the new one starts (`_ensure_pod`)."""
    checkpoint = job.spec.checkpoint
    spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": checkpoint.volume_size}},
    }
    if checkpoint.storage_class_name is not None:
        spec["storageClassName"] = checkpoint.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": child_metadata(Names(owner.name).checkpoints, owner, "checkpoints"),
        "spec": spec,
    }


def restart_view(spec: StreamJobSpec) -> Manifest:
    """The spec without the fields that change live (function, params, executor count,
    policies): what a running driver cannot take without a restart."""
    view = spec.to_manifest()
    view.get("executor", {}).pop("instances", None)
    view.pop("policies", None)
    for claim_only in ("volumeSize", "storageClassName"):  # the claim is created once
        view.get("checkpoint", {}).pop(claim_only, None)
    for operator in view["dataflow"]["operators"]:
        operator.pop("function", None)
        operator.pop("params", None)
    return view


def restart_hash(spec: StreamJobSpec) -> str:
    canonical = json.dumps(restart_view(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
