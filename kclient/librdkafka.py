"""librdkafka's (confluent-kafka's) producer setting names → kclient's settings.

No Kafka component: the names only, so a confluent-kafka producer's config dict works as
it is. ``ProducerConfig`` (the caller's thread, once) asks ``translate`` about a name it
does not know. A librdkafka name is either

* **mapped**: the kclient setting it is, with the value converted to that setting's unit
  (``queue.buffering.max.kbytes`` → ``buffer.memory`` in bytes; librdkafka's "0 means
  infinite" → the largest value kclient takes), or
* **refused** with a ``ConfigError`` that names what to use instead (a count where kclient
  bounds bytes, a callback that is an argument of ``send`` in kclient).

librdkafka's names that are Java's too (``linger.ms``, ``batch.size``, ``acks``,
``enable.idempotence``, ``transactional.id`` ...) are kclient's settings already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kclient.errors import ConfigError

INT32_MAX = 2_147_483_647


@dataclass(frozen=True)
class Mapped:
    """A librdkafka name that is a kclient setting: ``setting``, after ``convert``."""

    setting: str
    convert: Callable[[str, object], object] | None = None
    note: str = ""


def _kbytes(name: str, value: object) -> object:
    return _times(name, value, 1024)


def _times(name: str, value: object, factor: int) -> object:
    number = _number(name, value)
    return number * factor


def _number(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name!r} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise ConfigError(f"{name!r} must be an integer, got {value!r} ({type(value).__name__})")


def _zero_is_infinite(name: str, value: object) -> object:
    """librdkafka's ``message.timeout.ms``: 0 waits forever; kclient's largest value."""
    number = _number(name, value)
    return INT32_MAX if number == 0 else number


def _zero_is_system_default(name: str, value: object) -> object:
    """librdkafka's socket buffers: 0 is the system's default, which kclient spells -1."""
    number = _number(name, value)
    return -1 if number == 0 else number


MAPPED: dict[str, Mapped] = {
    "queue.buffering.max.ms": Mapped("linger.ms"),
    "queue.buffering.max.kbytes": Mapped("buffer.memory", _kbytes, "KiB → bytes"),
    "message.timeout.ms": Mapped("delivery.timeout.ms", _zero_is_infinite, "0 → 2147483647"),
    "compression.codec": Mapped("compression.type"),
    "socket.timeout.ms": Mapped("request.timeout.ms"),
    "message.max.bytes": Mapped("max.request.size"),
    "request.required.acks": Mapped("acks"),
    "message.send.max.retries": Mapped("retries"),
    "metadata.broker.list": Mapped("bootstrap.servers"),
    "max.in.flight": Mapped("max.in.flight.requests.per.connection"),
    "topic.metadata.refresh.interval.ms": Mapped("metadata.max.age.ms"),
    "socket.send.buffer.bytes": Mapped("send.buffer.bytes", _zero_is_system_default, "0 → -1"),
    "socket.receive.buffer.bytes": Mapped(
        "receive.buffer.bytes", _zero_is_system_default, "0 → -1"
    ),
}
"""librdkafka's name → the kclient setting it is (and the conversion, shown in docs)."""

_CALLBACK = (
    "kclient takes the delivery callback per record: producer.send(topic, value, "
    "callback=fn), where fn(metadata, exception) runs on the producer's I/O thread (no "
    "poll() needed)"
)
_LOGGING = (
    "kclient logs through Python's logging module: logging.getLogger('kclient') (its "
    "level and handlers) instead"
)

REFUSED: dict[str, str] = {
    "queue.buffering.max.messages": (
        "kclient bounds the records waiting to be sent by their bytes, not their count: "
        "set 'buffer.memory' (bytes; 33554432 by default) instead"
    ),
    "batch.num.messages": (
        "kclient bounds a batch by its bytes, not its count: set 'batch.size' (bytes) instead"
    ),
    "compression.level": (
        "kclient has a level per codec: set 'compression.gzip.level', "
        "'compression.lz4.level' or 'compression.zstd.level' instead"
    ),
    "on_delivery": _CALLBACK,
    "dr_cb": _CALLBACK,
    "dr_msg_cb": _CALLBACK,
    "delivery.report.only.error": _CALLBACK + "; it can ignore successes itself",
    "error_cb": (
        "kclient raises a failure where it happens (send, flush, the record's future or "
        "callback) and logs the rest; " + _LOGGING
    ),
    "throttle_cb": "kclient honours a broker's throttle time itself (KIP-219); " + _LOGGING,
    "logger": _LOGGING,
    "debug": _LOGGING + " (DEBUG logs every request)",
    "log_level": _LOGGING,
    "sticky.partitioning.linger.ms": (
        "kclient's sticky partitioner moves on after 'batch.size' bytes (Java's KIP-794): "
        "leave it out"
    ),
    "partitioner_cb": "set 'partitioner' to a callable (topic, key_bytes, num_partitions)",
    "api.version.request": (
        "kclient always asks each broker for its versions (ApiVersions): leave it out"
    ),
    "broker.version.fallback": (
        "kclient always asks each broker for its versions (ApiVersions): leave it out"
    ),
    "sasl.kerberos.kinit.cmd": (
        "kclient runs no kinit: it gets its tickets from 'sasl.kerberos.keytab' itself (or "
        "uses the ticket cache): leave it out"
    ),
    "sasl.kerberos.min.time.before.relogin": (
        "libkrb5 gets a new ticket from 'sasl.kerberos.keytab' when the old one runs out: "
        "leave it out"
    ),
}
"""librdkafka's names kclient has no setting for, and what to do instead."""

LIBRDKAFKA_NAMES = frozenset(MAPPED) | frozenset(REFUSED)


def translate(key: str, value: object) -> tuple[str, object] | None:
    """``(kclient setting, value)`` for a librdkafka name, a ``ConfigError`` for a name
    kclient refuses, or None when ``key`` is not librdkafka's."""
    dotted = key if key in LIBRDKAFKA_NAMES else key.replace("_", ".")
    mapped = MAPPED.get(dotted)
    if mapped is not None:
        return mapped.setting, value if mapped.convert is None else mapped.convert(key, value)
    reason = REFUSED.get(key, REFUSED.get(dotted))
    if reason is not None:
        raise ConfigError(f"{key!r} is librdkafka's (confluent-kafka's) setting: {reason}")
    return None


def markdown() -> str:
    """The docs' table of librdkafka's names: what each is in kclient."""
    rows = ["| librdkafka | kclient |", "|---|---|"]
    for name, mapped in MAPPED.items():
        note = f" ({mapped.note})" if mapped.note else ""
        rows.append(f"| `{name}` | `{mapped.setting}`{note} |")
    for name, reason in REFUSED.items():
        rows.append(f"| `{name}` | refused: {reason} |")
    return "\n".join(rows) + "\n"
