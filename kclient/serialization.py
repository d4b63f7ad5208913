"""Key and value serializers: Java's ``Serializer`` implementations.

Run on the caller's thread inside ``KafkaProducer.send``. The default is bytes
pass-through (``bytes``, ``bytearray``, ``memoryview`` or ``None``); ``str`` (UTF-8),
JSON and big-endian integer serializers are provided, and any callable ``value -> bytes``
or object with Java's ``serialize(topic, data)`` method works.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

from kclient.errors import SerializationError

SerializeFn = Callable[[str, Any], "bytes | None"]
"""The normalized form the producer calls: ``(topic, data) -> bytes | None``."""


class StringSerializer:
    """Java's ``StringSerializer``: text encoded with ``encoding`` (UTF-8 by default)."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def __call__(self, data: str | None) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, str):
            raise SerializationError(f"StringSerializer expects str, got {type(data).__name__}")
        return data.encode(self.encoding)


class JsonSerializer:
    """Any JSON-serializable value as compact UTF-8 JSON (``None`` stays a null record)."""

    def __init__(self, **dumps_kwargs: Any) -> None:
        self._kwargs = {"separators": (",", ":"), **dumps_kwargs}

    def __call__(self, data: object) -> bytes | None:
        if data is None:
            return None
        return json.dumps(data, **self._kwargs).encode("utf-8")


class IntegerSerializer:
    """Java's ``IntegerSerializer`` (4 bytes) or ``LongSerializer`` (8 bytes), big-endian."""

    def __init__(self, size: int = 4) -> None:
        if size not in (4, 8):
            raise ValueError("IntegerSerializer size must be 4 or 8 bytes")
        self._struct = struct.Struct(">i" if size == 4 else ">q")

    def __call__(self, data: int | None) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, bool) or not isinstance(data, int):
            raise SerializationError(f"IntegerSerializer expects int, got {type(data).__name__}")
        try:
            return self._struct.pack(data)
        except struct.error:
            bits = self._struct.size * 8
            raise SerializationError(
                f"{data} does not fit in a signed {bits}-bit integer"
            ) from None


_BY_NAME: dict[str, Callable[[], Callable[[Any], bytes | None]]] = {
    "str": StringSerializer,
    "string": StringSerializer,
    "json": JsonSerializer,
    "int": IntegerSerializer,
    "integer": IntegerSerializer,
    "long": lambda: IntegerSerializer(8),
}


def resolve(spec: object, setting: str) -> SerializeFn | None:
    """Normalize a ``key.serializer`` / ``value.serializer`` setting.

    Returns None for the bytes pass-through default, so the hot path can skip a call.
    """
    if spec is None or spec in ("bytes", "bytearray", "ByteArraySerializer"):
        return None
    if isinstance(spec, str):
        factory = _BY_NAME.get(spec.lower())
        if factory is None:
            names = ", ".join(["bytes", *_BY_NAME])
            raise SerializationError(f"{setting!r}: unknown serializer {spec!r} (use {names})")
        plain = factory()
        return lambda topic, data: plain(data)
    serialize = getattr(spec, "serialize", None)
    if callable(serialize):
        java_style: SerializeFn = serialize
        return java_style
    if callable(spec):
        func: Callable[[Any], bytes | None] = spec
        return lambda topic, data: func(data)
    raise SerializationError(f"{setting!r} must be a callable, got {type(spec).__name__}")


def to_bytes(what: str, data: object) -> bytes | None:
    """The pass-through default: bytes-like or None, anything else is a clear error."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise SerializationError(
        f"{what} must be bytes or None, got {type(data).__name__}; "
        f"set '{what}.serializer' (e.g. 'str' or 'json') to send other types"
    )


def apply(fn: SerializeFn, what: str, topic: str, data: object) -> bytes | None:
    """Run a configured serializer and check its result."""
    try:
        out = fn(topic, data)
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(f"{what}.serializer failed for topic {topic!r}: {exc!r}") from exc
    if out is None or type(out) is bytes:
        return out
    if isinstance(out, (bytearray, memoryview)):
        return bytes(out)
    raise SerializationError(
        f"{what}.serializer returned {type(out).__name__} for topic {topic!r}; it must return bytes"
    )
