"""The load measurement a job's driver posts to its agent (`POST /v1/driver/loads`).

`MigrationDriver` measures per-bin records and state size and per-executor busy time and
memory after batches (`swivel.jobs.migration.metrics`) and posts a `LoadMeasurement`'s
wire form; the agent validates the body against the same model
(`swivel.jobs.agent.loads.parse_loads`: a 400 with one `field: reason` per bad field),
serves the latest at `GET /v1/loads` (a `ServedLoads`: the measurement and its age) and as
gauges in `/metrics`, and the operator's policy timers read that answer with the same
models (`swivel.operator.agents`; docs/control-protocol.md, "Loads"). The served document
also carries the workers' own counts (`workers`: `swivel.protocol.counts.WorkerLoads`, the
agent's sliding window over what the workers piggyback on their acks).

Numbers are strict: a JSON number, finite and non-negative; a boolean or a numeric string
is refused, not coerced, and counts (records, rows, bytes, cores) are integers. A number
left out counts as 0, except `cores` (1) and `busyFraction`, `measuredAt`,
`coordinationIntervalSeconds`, `memoryLimitBytes` (unknown; the agent's gauges derive a
missing busyFraction from busySeconds / windowSeconds). Whether `bin` is one of the job's
bins needs the job: validate with `context={"bins": n}`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Annotated, Any, ClassVar, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from swivel.api.errors import semantic_error
from swivel.protocol.counts import WorkerLoads
from swivel.protocol.documents import Document

Number = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
ExecutorId = Annotated[str, Field(min_length=1, description="Spark's executor id")]


class _Measurement(Document):
    def to_wire(self) -> dict[str, Any]:
        """The JSON body: camelCase, only the fields that were given (a field given as
        null is left out: null and absent mean the same here)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude_none=True)


class ExecutorMeasurement(_Measurement):
    executor: ExecutorId
    busy_seconds: Number = 0.0  # its tasks' run time over the window, per core
    window_seconds: Number = 0.0
    busy_fraction: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    memory_bytes: Count = 0  # state bytes of the bins it serves (Flux's memory policy)
    memory_limit_bytes: Count | None = None
    jvm_memory_used_bytes: Count = 0
    jvm_memory_max_bytes: Count = 0
    cores: Count = 1


class BinMeasurement(_Measurement):
    bin: Count
    executor: ExecutorId  # the executor that ran it in the latest measured batch
    records: Count = 0
    task_ms: Number = 0.0
    state_rows: Count = 0
    state_bytes: Count = 0

    @field_validator("bin")
    @classmethod
    def _a_bin_of_the_job(cls, value: int, info: ValidationInfo) -> int:
        bins = (info.context or {}).get("bins")
        if bins is not None and value >= bins:
            raise ValueError(f"not a bin of this job (its bins are 0..{bins - 1})")
        return value


class LoadMeasurement(_Measurement):
    """One collection phase: what the driver measured over `batches`."""

    executors: list[ExecutorMeasurement]
    bins: list[BinMeasurement]
    measured_at: Number | None = None  # epoch seconds, the driver's clock
    batches: list[Count] = Field(default_factory=list)
    window_seconds: Number = 0.0  # the measured batches' durations, summed
    coordination_seconds: Number = 0.0  # Drizzle's overhead numerator, since the last one
    processing_seconds: Number = 0.0  # batch time over the same period
    coordination_interval_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    state_error: str | None = None  # why state rows/bytes are missing, when they are

    @model_validator(mode="after")
    def _each_listed_once(self) -> Self:
        repeat = _first_repeat(e.executor for e in self.executors)
        if repeat is not None:
            index, first = repeat
            executor = self.executors[index].executor
            raise semantic_error(
                f"executors[{index}].executor",
                f"{executor!r} listed twice (first at executors[{first}])",
            )
        repeat = _first_repeat(b.bin for b in self.bins)
        if repeat is not None:
            index, first = repeat
            raise semantic_error(
                f"bins[{index}].bin",
                f"bin {self.bins[index].bin} listed twice (first at bins[{first}])",
            )
        return self


class ServedLoads(LoadMeasurement):
    """`GET /v1/loads`: the latest measurement as the agent keeps it, and when it came."""

    openapi_name: ClassVar[str] = "Loads"  # its component in the agent's OpenAPI document

    received_at: Number | None = None  # epoch seconds, the agent's clock
    age_seconds: Number = 0.0  # since the agent received it
    workers: WorkerLoads | None = None
    """What the workers reported over the agent's sliding window (rows and busy time per
    bin, `swivel.protocol.counts`), when any did: fresher than the driver's measurement."""


def _first_repeat(values: Iterable[Hashable]) -> tuple[int, int] | None:
    """(index, index of its first occurrence) of the first value seen before, if any."""
    seen: dict[Hashable, int] = {}
    for index, value in enumerate(values):
        if value in seen:
            return index, seen[value]
        seen[value] = index
    return None
