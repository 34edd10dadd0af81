"""Load statistics the driver measures for the bin policies (docs/control-protocol.md, "Loads").

The driver (`swivel.jobs.migration.driver.MigrationDriver`) measures per-bin records and
state size and per-executor busy time and memory after batches, at most once per
coordination interval, and posts them (`POST /v1/driver/loads`); the agent keeps the
latest document, serves it at `GET /v1/loads` (with its age) and as gauges in `/metrics`.
The operator's policy timers read `GET /v1/loads` (`ClientAgentLink.loads`).

The document is `swivel.protocol.loads.LoadMeasurement`; `parse_loads` refuses a body that is
not one, naming each bad field (400), before anything is kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from swivel.api.errors import FieldProblem, problems_from
from swivel.protocol.loads import LoadMeasurement


class LoadsRejected(ValueError):  # noqa: N818 - reads as the outcome, like PlanRejected
    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def parse_loads(body: Any, bins: int) -> dict[str, Any]:
    """The body as kept (the fields it gave, numbers as JSON numbers), or LoadsRejected
    naming each bad field (`body` when it is not an object at all)."""
    try:
        measurement = LoadMeasurement.model_validate(body, context={"bins": bins})
    except ValidationError as error:
        problems = [FieldProblem(p.field or "body", p.reason) for p in problems_from(error)]
        raise LoadsRejected(problems) from None
    return measurement.to_wire()
