"""Message declarations as data, in the shape of Kafka's message JSON files.

Corresponds to Kafka's ``clients/src/main/resources/common/message/*.json`` and the
generator's ``MessageSpec``/``FieldSpec``/``Versions``: a message is an api key, the
versions it is valid in, the versions that are flexible (KIP-482), and a tree of fields;
each field names its type, the versions it exists in, the versions in which it is
nullable or tagged (with its tag) and its default. Immutable, so any thread may share it.

Field names are written as in Kafka's JSON (``ThrottleTimeMs``); bodies use them in
snake_case (``throttle_time_ms``). The one generic codec lives in ``codec.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kclient.protocol.types import ZERO_UUID

MAX_VERSION = 0x7FFF

FIXED_TYPES: dict[str, tuple[str, int]] = {  # type → (struct format char, size)
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
}
SCALAR_TYPES = frozenset(FIXED_TYPES) | {"string", "bytes", "uuid", "records"}

_UNSET: Any = object()
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(name: str) -> str:
    """Kafka's JSON field name in snake_case: ``TopicData`` → ``topic_data``."""
    return _CAMEL.sub("_", name).lower()


@dataclass(frozen=True)
class Versions:
    """An inclusive version range: ``"3+"``, ``"0-12"``, ``"7"`` or ``"none"``."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def is_empty(self) -> bool:
        return self.low > self.high

    def __str__(self) -> str:
        if self.is_empty():
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        return f"{self.low}" if self.low == self.high else f"{self.low}-{self.high}"


@dataclass(frozen=True)
class Field:
    """One field of a message or struct, as declared in Kafka's message JSON."""

    name: str
    type: str
    versions: Versions
    nullable_versions: Versions
    tagged_versions: Versions
    tag: int | None
    default: Any
    fields: tuple[Field, ...]
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", snake_case(self.name))
        item = self.item_type
        if self.fields and item in SCALAR_TYPES:
            raise ValueError(f"{self.name}: a {self.type} field cannot have sub-fields")
        if not self.fields and item not in SCALAR_TYPES:
            raise ValueError(f"{self.name}: unknown type {self.type!r}")
        if self.tagged_versions.is_empty() != (self.tag is None):
            raise ValueError(f"{self.name}: tag and tagged versions go together")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def item_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """A struct or an array of structs (the field has sub-fields)."""
        return bool(self.fields)

    def required_in(self, version: int, flexible: bool) -> bool:
        """Whether a body must give this field at ``version``: it is there, not tagged, and
        has no declared default (an encoder refuses a body without it)."""
        return (
            self.default is _UNSET
            and version in self.versions
            and not (flexible and version in self.tagged_versions)
        )

    def default_value(self, version: int) -> Any:
        """A fresh default for this field at ``version`` (lists and dicts are new objects)."""
        if self.default is not _UNSET:
            return self.default
        if self.is_array:
            return []
        if self.fields:
            return {f.key: f.default_value(version) for f in self.fields if version in f.versions}
        kind = self.type
        if kind == "bool":
            return False
        if kind == "float64":
            return 0.0
        if kind in FIXED_TYPES:
            return 0
        if kind == "string":
            return ""
        if kind == "uuid":
            return ZERO_UUID
        if kind == "bytes":
            return b""
        return None if version in self.nullable_versions else b""  # records


def declared_keys(fields: tuple[Field, ...]) -> frozenset[str]:
    """The keys a body of a struct with ``fields`` may hold, in any version: every field's
    snake_case name. An encoder refuses any other key (a misspelt ``"ackz"`` must not
    quietly send the default of ``acks``)."""
    return frozenset(f.key for f in fields)


def F(  # reads like the JSON line it mirrors
    name: str,
    type: str,
    versions: str,
    *,
    nullable: str = "none",
    tagged: str = "none",
    tag: int | None = None,
    default: Any = _UNSET,
    fields: tuple[Field, ...] = (),
) -> Field:
    """Declare a field: ``F("Acks", "int16", "0+")``, like a line of Kafka's JSON."""
    return Field(
        name=name,
        type=type,
        versions=Versions.parse(versions),
        nullable_versions=Versions.parse(nullable),
        tagged_versions=Versions.parse(tagged),
        tag=tag,
        default=default,
        fields=tuple(fields),
    )


@dataclass(frozen=True)
class Message:
    """A request or response body: api key, valid and flexible versions, fields."""

    name: str
    api_key: int
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def message(
    name: str, api_key: int, valid: str, flexible: str, fields: tuple[Field, ...]
) -> Message:
    """Declare a message: ``message("ProduceRequest", 0, "3-13", "9+", (F(...), ...))``."""
    return Message(name, api_key, Versions.parse(valid), Versions.parse(flexible), tuple(fields))
