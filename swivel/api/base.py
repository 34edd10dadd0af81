"""The base every API model shares: camelCase on the wire, snake_case in Python, unknown
fields refused, and a marker saying how disruptive a change to a field is.

Kubernetes manifests are camelCase; Python is snake_case. One alias generator keeps both
honest, and `extra="forbid"` turns a misspelt field into an error that names it instead of
a silently ignored setting.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )

    def to_manifest(self) -> dict[str, Any]:
        """The wire form: camelCase, JSON types, defaults included."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class WireDocument(ApiModel):
    """A document that crosses a process boundary: strict JSON types (no numeric strings,
    no booleans as numbers), and an object at the top, said in words a caller understands."""

    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        # Without this pydantic says "a valid dictionary or instance of <class>".
        if not isinstance(data, (dict, cls)):
            raise PydanticCustomError("object_type", "expected a JSON object")
        return data


API_GROUP = "swivel.dev"
API_VERSION = "v1alpha1"


class Resource(ApiModel):
    """What both custom resources share: the envelope. Subclasses set `kind`'s default."""

    api_version: str = f"{API_GROUP}/{API_VERSION}"
    kind: str
    metadata: dict[str, object] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", "default"))


class Disruption(enum.IntEnum):
    """How disruptive a change to a spec field is (after Flink's `@SpecDiff`).

    Ordered, so the disruption of a whole diff is the maximum over its fields:
    NONE < LIVE_CONTROL (a fast control message) < LIVE_MIGRATION (bins move at batch
    boundaries) < RESTART (stop at a batch boundary, keep the checkpoint, start again).
    Declared on each field with `Annotated[T, Disruption.X]`.
    """

    NONE = 0
    LIVE_CONTROL = 1
    LIVE_MIGRATION = 2
    RESTART = 3

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")
