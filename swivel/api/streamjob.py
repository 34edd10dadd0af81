"""The StreamJob custom resource: a PySpark Structured Streaming dataflow Swivel runs.

Only `spec.dataflow` is required: every other field has a default that runs on a laptop
(embedded mode) and on a small cluster, so a manifest can grow from ten lines.
Each field declares how disruptive changing it is (`Disruption`); the operator takes the
least disruptive path for an edit (swivel.api.changes).
"""

from __future__ import annotations

import enum
import re
from datetime import datetime
from decimal import Decimal
from typing import Annotated

from pydantic import BeforeValidator, Field, ValidationInfo, model_validator

from swivel.api.base import ApiModel, Disruption, Resource
from swivel.api.conditions import Condition
from swivel.api.dataflow import DataflowSpec
from swivel.api.errors import semantic_error
from swivel.api.sparkconf import is_trusted, refused

DEFAULT_IMAGE = "ghcr.io/swivel-dev/swivel:0.1.0"
# A byte count as a Kubernetes quantity. Kubernetes also admits "m" (milli), which for bytes
# is a slip for "Mi" ("512m" is half a byte), so it is refused here rather than rounded.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(k|M|G|T|Ki|Mi|Gi|Ti)?$"


def _refuse_milli(value: object) -> object:
    """Say what a milli size means, before the pattern answers with a regular expression."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]+(\.[0-9]+)?m", value):
        number = value.removesuffix("m")
        raise semantic_error(
            "",
            f"{value!r} is {Decimal(number) / 1000} bytes ('m' is milli);"
            f" for mebibytes write '{number}Mi'",
        )
    return value


ByteQuantity = Annotated[str, BeforeValidator(_refuse_milli), Field(pattern=QUANTITY_PATTERN)]


class DriverSpec(ApiModel):
    cores: int = Field(default=1, ge=1, le=64)
    memory: ByteQuantity = Field(default="1Gi", description="Kubernetes quantity.")


class ExecutorSpec(ApiModel):
    instances: Annotated[int, Disruption.LIVE_MIGRATION] = Field(
        default=2, ge=1, le=1000, description="Executors; changed live (bins migrate)."
    )
    cores: Annotated[int, Disruption.RESTART] = Field(default=1, ge=1, le=64)
    memory: Annotated[ByteQuantity, Disruption.RESTART] = Field(default="1Gi")


class SourceKind(enum.StrEnum):
    GENERATOR = "generator"  # a deterministic synthetic stream (demos, benchmarks)
    RATE = "rate"  # Spark's rate source
    FILES = "files"  # a directory of JSON/CSV/Parquet files
    KAFKA = "kafka"


class SourceSpec(ApiModel):
    kind: SourceKind = SourceKind.GENERATOR
    rows_per_second: int = Field(default=100, ge=1, le=10_000_000)
    options: dict[str, str] = Field(
        default_factory=dict, description="Passed to the Spark source (path, format, topic...)."
    )


class SinkKind(enum.StrEnum):
    MEMORY = "memory"
    CONSOLE = "console"
    FILES = "files"
    KAFKA = "kafka"
    NOOP = "noop"


class SinkSpec(ApiModel):
    kind: SinkKind = SinkKind.MEMORY
    options: dict[str, str] = Field(default_factory=dict)


class TriggerSpec(ApiModel):
    interval_ms: int = Field(
        default=1000,
        ge=0,
        le=86_400_000,
        description="Micro-batch interval; 0 = as fast as possible.",
    )


class CheckpointSpec(ApiModel):
    location: str | None = Field(
        default=None,
        description=(
            "Checkpoint root URI; default: a per-job directory on the job's checkpoint volume"
            " (a PersistentVolumeClaim the operator creates, kept across driver restarts)."
        ),
    )
    # The claim is created once (Kubernetes only lets a claim grow, never change class), so
    # these change nothing running: no restart.
    volume_size: Annotated[ByteQuantity, Disruption.NONE] = Field(
        default="1Gi",
        description="Size of the checkpoint PersistentVolumeClaim (when `location` is unset).",
    )
    storage_class_name: Annotated[str | None, Disruption.NONE] = Field(
        default=None,
        description="Storage class of the checkpoint claim; default: the cluster's default.",
    )


class RebalancePolicySpec(ApiModel):
    """Flux's load-balancing rounds (utilisation pairing, thresholds, damping)."""

    enabled: bool = False
    interval_seconds: int = Field(
        default=60,
        ge=5,
        le=86_400,
        description="Flux's minimum (and first) collection phase; damping may lengthen it.",
    )
    imbalance_threshold: float = Field(default=1.5, ge=1.0, le=100.0)
    receiver_max_utilisation: float = Field(default=0.8, ge=0.0, le=1.0)


class MemoryPolicySpec(ApiModel):
    """Flux's memory-constrained policy: keep each executor's state under a limit."""

    enabled: bool = False
    interval_seconds: int = Field(
        default=60,
        ge=5,
        le=86_400,
        description="Flux's minimum (and first) collection phase; damping may lengthen it.",
    )
    limit_fraction: float = Field(default=0.7, gt=0.0, le=1.0, description="Of executor memory.")


class AimdPolicySpec(ApiModel):
    """Drizzle's AIMD: tune the coordination interval to keep overhead in a band."""

    enabled: bool = False
    lower_overhead: float = Field(default=0.05, ge=0.0, le=1.0)
    upper_overhead: float = Field(default=0.10, ge=0.0, le=1.0)
    min_interval_ms: int = Field(default=100, ge=0)
    max_interval_ms: int = Field(default=10_000, ge=1)

    @model_validator(mode="after")
    def _bands_are_ordered(self) -> AimdPolicySpec:
        if self.lower_overhead >= self.upper_overhead:
            raise semantic_error("lowerOverhead", "must be below upperOverhead")
        if self.min_interval_ms > self.max_interval_ms:
            raise semantic_error("minIntervalMs", "must not exceed maxIntervalMs")
        return self


class PoliciesSpec(ApiModel):
    rebalance: RebalancePolicySpec = Field(default_factory=RebalancePolicySpec)
    memory: MemoryPolicySpec = Field(default_factory=MemoryPolicySpec)
    aimd: AimdPolicySpec = Field(default_factory=AimdPolicySpec)


class StreamJobSpec(ApiModel):
    image: Annotated[str, Disruption.RESTART] = DEFAULT_IMAGE
    driver: Annotated[DriverSpec, Disruption.RESTART] = Field(default_factory=DriverSpec)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    spark_conf: Annotated[dict[str, str], Disruption.RESTART] = Field(default_factory=dict)
    source: Annotated[SourceSpec, Disruption.RESTART] = Field(default_factory=SourceSpec)
    sink: Annotated[SinkSpec, Disruption.RESTART] = Field(default_factory=SinkSpec)
    trigger: Annotated[TriggerSpec, Disruption.RESTART] = Field(default_factory=TriggerSpec)
    checkpoint: Annotated[CheckpointSpec, Disruption.RESTART] = Field(
        default_factory=CheckpointSpec
    )
    dataflow: DataflowSpec
    policies: Annotated[PoliciesSpec, Disruption.NONE] = Field(default_factory=PoliciesSpec)

    @model_validator(mode="after")
    def _no_escalation_through_spark_conf(self, info: ValidationInfo) -> StreamJobSpec:
        """Keys that mount Secrets or host paths, switch identity or load code are refused
        (swivel.api.sparkconf), except in the operator's own rendering of the job."""
        if is_trusted(info.context):
            return self
        problems = refused(self.spark_conf)
        if problems:
            key, reason = problems[0]
            more = [k for k, _ in problems[1:]]
            if more:
                reason += f" (also refused: {', '.join(more)})"
            raise semantic_error(f"sparkConf[{key}]", reason)
        return self


class JobPhase(enum.StrEnum):
    PENDING = "Pending"
    STARTING = "Starting"
    RUNNING = "Running"
    RECONFIGURING = "Reconfiguring"
    RESTARTING = "Restarting"
    DEGRADED = "Degraded"
    FAILED = "Failed"


class LiveOperatorConfig(ApiModel):
    operator: str
    function: str | None = None
    version: int = Field(ge=0)


class LastReconfiguration(ApiModel):
    name: str
    kind: str
    delay_ms: float | None = Field(default=None, ge=0)
    completed_at: datetime | None = None


class PolicyRound(ApiModel):
    """A Flux policy's rounds, kept so a restarted operator keeps the damped deadline."""

    collection_seconds: float = Field(
        gt=0, description="Flux's collection phase: the last move phase's length, >= the minimum."
    )
    collecting_since: datetime = Field(
        description="When the last move phase ended: statistics count from here."
    )
    next_round_at: datetime | None = Field(
        default=None, description="The damped deadline; unset while a move phase runs."
    )
    move_phase_started_at: datetime | None = None
    last_move_phase_seconds: float | None = Field(default=None, ge=0)
    reconfiguration: str | None = Field(
        default=None, description="The Reconfiguration of the move phase under way."
    )


class StreamJobStatus(ApiModel):
    phase: JobPhase = JobPhase.PENDING
    observed_generation: int | None = Field(default=None, ge=0)
    live_generation: int | None = Field(
        default=None, ge=0, description="Configuration version the running job has switched to."
    )
    conditions: list[Condition] = Field(default_factory=list)
    operators: list[LiveOperatorConfig] = Field(default_factory=list)
    executors: int | None = Field(default=None, ge=0)
    bins_per_executor: dict[str, int] = Field(default_factory=dict)
    policy_rounds: dict[str, PolicyRound] = Field(
        default_factory=dict, description="Flux's rounds per policy (rebalance, memory)."
    )
    last_reconfiguration: LastReconfiguration | None = None
    message: str | None = None


class StreamJob(Resource):
    kind: str = "StreamJob"
    spec: StreamJobSpec
    status: StreamJobStatus | None = None
