"""Checks of ``send``'s record arguments (topic, partition, timestamp, headers), run on
its general path only: each bad value gets a typed error naming the argument and what
it must be, before anything is queued (Java's ProducerRecord checks, in our words)."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from kclient.sender.batch import Header

_BYTES = (bytes, bytearray, memoryview)


def _int(name: str, value: Any, meaning: str) -> int:
    if value.__class__ is int:
        number: int = value
    else:
        if isinstance(value, bool):
            raise TypeError(f"{name} must be an int ({meaning}) or None, got bool")
        try:
            number = operator.index(value)  # numpy and other integer types
        except TypeError:
            raise TypeError(
                f"{name} must be an int ({meaning}) or None, got {type(value).__name__}"
            ) from None
    if number < 0:
        raise ValueError(f"{name} must be >= 0 or None, got {number}")
    return number


def checked_topic(topic: Any) -> str:
    """The topic as a plain ``str`` (a ``str`` subclass, e.g. a ``str`` enum, gives its
    value); anything else is a TypeError before it reaches the producer's metadata."""
    if isinstance(topic, str):
        return str.__str__(topic)
    raise TypeError(f"topic must be a str, got {type(topic).__name__}: {topic!r:.80}")


def checked_partition(partition: Any) -> int | None:
    return None if partition is None else _int("partition", partition, "a partition number")


def checked_timestamp(timestamp_ms: Any) -> int | None:
    if timestamp_ms is None:
        return None
    return _int("timestamp_ms", timestamp_ms, "milliseconds since the epoch")


def checked_headers(headers: Any) -> list[Header]:
    """A list of (str, bytes | None) pairs; a mapping gives its items."""
    if isinstance(headers, Mapping):
        headers = list(headers.items())
    elif isinstance(headers, (str, *_BYTES)) or not hasattr(headers, "__iter__"):
        raise TypeError(
            "headers must be a list of (str key, bytes or None value) pairs (or a dict), "
            f"got {type(headers).__name__}"
        )
    out: list[Header] = []
    for index, header in enumerate(headers):
        if not isinstance(header, (tuple, list)) or len(header) != 2:
            raise TypeError(
                f"headers[{index}] must be a (str key, bytes or None value) pair, got {header!r}"
            )
        name, data = header
        if not isinstance(name, str):
            raise TypeError(f"headers[{index}]: the key must be str, got {type(name).__name__}")
        if data is not None and not isinstance(data, _BYTES):
            raise TypeError(
                f"headers[{index}] ({name!r}): the value must be bytes or None, got "
                f"{type(data).__name__} (encode it, e.g. value.encode())"
            )
        out.append((name, None if data is None else bytes(data)))
    return out
