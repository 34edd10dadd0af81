"""Worker acknowledgements (`POST /v1/control/acks`, docs/control-protocol.md).

The control client in every Python worker (`swivel.jobs.control.client`, standard library
only) posts a JSON array of acks; `parse_acks` validates the whole body against `Ack`
before the hub applies any of it, so a bad field is a 400 naming it (`[2].kind`) and never
half a body applied. Numbers are strict, as in `swivel.api.loads`: a JSON number, not a
boolean or a numeric string.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from swivel.api.base import ApiModel
from swivel.api.errors import FieldProblem, problems_from
from swivel.jobs.control.arming import ARMED, PROCESSED

Count = Annotated[int, Field(ge=0)]


class AckKind(enum.StrEnum):
    """How a worker switched (`swivel.jobs.control.arming`)."""

    PROCESSED = PROCESSED  # records ran under the version
    ARMED = ARMED  # switched on receipt of the snapshot


class Ack(ApiModel):
    """'Worker `pid` switched `operator` to function `version` under `configVersion`.'"""

    model_config = ConfigDict(strict=True)

    pid: Count
    operator: Annotated[str, Field(min_length=1)]
    version: Count  # the operator's function version
    config_version: Count | None = None  # a head that is no target switches by this
    partition: Count | None = None
    batch_id: Count | None = None  # the micro-batch that ran it (processed)
    # When it switched, worker clock: the check that chose the version, or the receipt;
    # the agent's arrival time when left out.
    at: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    kind: Annotated[AckKind, Field(strict=False)] = AckKind.PROCESSED  # from its value

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        # Without this pydantic says "a valid dictionary or instance of <class>".
        if not isinstance(data, (dict, cls)):
            raise PydanticCustomError("object_type", "expected a JSON object")
        return data


_ACKS = TypeAdapter(list[Ack])


class AcksRejected(ValueError):  # noqa: N818 - reads as the outcome, like LoadsRejected
    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def parse_acks(body: Any) -> list[Ack]:
    """The acks of a body, or AcksRejected naming each bad field (`[i].field`; `body` when
    it is not an array at all)."""
    if not isinstance(body, list):
        raise AcksRejected([FieldProblem("body", "expected a JSON array of acks")])
    try:
        return _ACKS.validate_python(body)
    except ValidationError as error:
        raise AcksRejected(problems_from(error)) from None
