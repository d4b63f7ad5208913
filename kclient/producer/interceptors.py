"""Producer interceptors: Java's ``ProducerInterceptor`` and ``ProducerInterceptors``.

``KafkaProducer(..., interceptors=[...])`` takes objects with three methods:

* ``on_send(record) -> record``: called by ``send`` (on the caller's thread) before the
  key and value are serialized and the partition is chosen; it may return a changed
  ``ProducerRecord`` (``record._replace(headers=...)``), which the next interceptor gets
  and the producer sends.
* ``on_acknowledgement(metadata, exception)``: once per record, when it was delivered
  (``metadata``, exception None) or failed (the exception, and as Java's a ``metadata``
  with the topic, the partition if the record named one, else -1, offset -1) — including a
  ``send`` that raised, records of ``send_batch``, records that timed out and records of
  an aborted transaction. Called on the producer's I/O thread (the Sender thread, or the
  event loop of ``kclient.aio``) before the record's callback: it must be quick and must
  not block, or every record of the producer waits for it.
* ``close()``: once, when the producer is closed, after the last acknowledgement.

Two optional methods (checked for once, when the producer is created):

* ``configure(config)``: called once with the producer's ``ProducerConfig`` when the
  producer is created (Java's ``Configurable.configure``), e.g. to read ``client.id``.
* ``on_send_record(record) -> (record, acknowledge)``: called instead of ``on_send``; it
  returns the record to send and a callable (or None) that gets *this* record's
  acknowledgement, ``acknowledge(metadata, exception)`` with ``on_acknowledgement``'s
  arguments, once, after the interceptors' ``on_acknowledgement`` and before the record's
  callback (on the I/O thread). It is how an interceptor keeps per-record state from
  ``send`` to the acknowledgement (``kclient.opentelemetry.TracingInterceptor`` ends the
  record's span there) without a lookup table.

An exception raised by one of them is logged (the first of each kind per interceptor with
its traceback, then a count at most once a minute) and never stops the producer or loses
the record: when ``on_send`` raises, the record as that interceptor got it goes on to the
next one (Java's rule). ``ProducerInterceptor`` is a base class whose methods do nothing,
for interceptors that need only one of them.

Without interceptors nothing here runs: ``send`` keeps its fast path. With them, ``send``
takes the general path (``KafkaProducer._send_general``) and each record's callback is
wrapped (``ProducerInterceptors.wrap``), so the acknowledgement rides on the batch's one
pass over its callbacks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from kclient.sender.batch import Callback, Header
from kclient.sender.future import RecordMetadata

log = logging.getLogger(__name__)

LOG_INTERVAL_MS = 60_000
"""After the first error of a kind, an interceptor's errors are counted and logged at most
this often."""


RecordAcknowledgement = Callable[[RecordMetadata | None, BaseException | None], object]
"""What an interceptor's ``on_send_record`` returns with the record: called once with that
record's acknowledgement."""

RecordAcks = tuple[tuple[int, RecordAcknowledgement], ...]
"""One record's ``on_send_record`` acknowledgements, with the index of the interceptor that
returned each (for the error log)."""


class ProducerRecord(NamedTuple):
    """A record to send, as a value (Java's ``ProducerRecord``):
    ``producer.send(**record._asdict())``, and what an interceptor's ``on_send`` gets and
    returns. ``value`` and ``key`` are not serialized yet; ``partition`` and
    ``timestamp_ms`` None mean the partitioner's choice and now."""

    topic: str
    value: object = None
    key: object = None
    headers: Sequence[Header] | None = None
    partition: int | None = None
    timestamp_ms: int | None = None


@runtime_checkable
class Interceptor(Protocol):
    """What ``interceptors`` takes: objects with these three methods."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord: ...

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None: ...

    def close(self) -> None: ...


class ProducerInterceptor:
    """A base class for interceptors: every method does nothing (``on_send`` returns the
    record unchanged); override the ones needed. Two optional methods may be added:
    ``configure(config)`` (called once with the producer's ``ProducerConfig``) and
    ``on_send_record(record) -> (record, acknowledge)`` (called instead of ``on_send``;
    ``acknowledge(metadata, exception)`` then gets that record's acknowledgement), as
    ``kclient.opentelemetry.TracingInterceptor`` has them."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """Return the record to send (``record`` itself, or ``record._replace(...)``)."""
        return record

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        """A record was delivered (``metadata``) or failed (``exception``, and a
        ``metadata`` with only the topic and the given partition or -1); I/O thread."""

    def close(self) -> None:
        """The producer closed."""


def failed_metadata(topic: str, partition: int | None) -> RecordMetadata:
    """What ``on_acknowledgement`` gets with a failed record's exception (Java's rule): the
    record's topic, its partition if it was given (else -1), offset and timestamp -1."""
    return RecordMetadata(topic, -1 if partition is None else partition, -1, -1)


class ProducerInterceptors:
    """The configured interceptors of one producer, called in order (Java's
    ``ProducerInterceptors``). ``monotonic_ms`` is the producer's clock (for the rate
    limit of the error log)."""

    def __init__(
        self,
        interceptors: Sequence[Interceptor],
        monotonic_ms: Callable[[], int],
        log_prefix: str = "",
        config: object = None,
    ) -> None:
        self.interceptors = tuple(interceptors)
        self._monotonic_ms = monotonic_ms
        self._prefix = log_prefix
        self._lock = threading.Lock()
        self._errors: dict[tuple[int, str], list[int]] = {}
        """(interceptor index, method) -> [errors not logged yet, last log time (ms)]."""
        self._record_hooks: tuple[Callable[[ProducerRecord], object] | None, ...] = tuple(
            _optional_method(interceptor, "on_send_record") for interceptor in self.interceptors
        )
        """Each interceptor's ``on_send_record`` (None: it has only ``on_send``)."""
        self.per_record = any(hook is not None for hook in self._record_hooks)
        """Whether an interceptor has ``on_send_record``."""
        if config is not None:  # Java's Configurable: once, before the first record
            for index, interceptor in enumerate(self.interceptors):
                configure = _optional_method(interceptor, "configure")
                if configure is not None:
                    try:
                        configure(config)
                    except Exception as exc:
                        self._log_error(index, "configure", exc)
        self._acknowledge: Callback = self.on_acknowledgement
        """The bound method, made once: the callback of records sent without one."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """Each interceptor's ``on_send`` in turn; one that raises (or returns something
        other than a ``ProducerRecord``) passes on the record it got."""
        for index, interceptor in enumerate(self.interceptors):
            try:
                changed = interceptor.on_send(record)
            except Exception as exc:
                self._log_error(index, "on_send", exc)
                continue
            if not isinstance(changed, ProducerRecord):
                self._log_error(
                    index,
                    "on_send",
                    TypeError(f"on_send returned {type(changed).__name__}, not a ProducerRecord"),
                )
                continue
            record = changed
        return record

    def on_send_record(self, record: ProducerRecord) -> tuple[ProducerRecord, RecordAcks | None]:
        """``on_send`` with the interceptors' per-record acknowledgements: each one's
        ``on_send_record`` (or ``on_send``) in turn; the record to send and the
        acknowledgements to pass to ``wrap``/``on_send_error`` (None: there are none)."""
        if not self.per_record:
            return self.on_send(record), None
        acks: list[tuple[int, RecordAcknowledgement]] = []
        for index, interceptor in enumerate(self.interceptors):
            hook = self._record_hooks[index]
            method = "on_send" if hook is None else "on_send_record"
            acknowledge = None
            try:
                if hook is None:
                    changed: object = interceptor.on_send(record)
                else:
                    changed, acknowledge = hook(record)  # type: ignore[misc]
            except Exception as exc:
                self._log_error(index, method, exc)
                continue
            if not isinstance(changed, ProducerRecord):
                self._log_error(
                    index,
                    method,
                    TypeError(f"{method} returned {type(changed).__name__}, not a ProducerRecord"),
                )
                changed = record  # the acknowledgement still ends what the hook began
            record = changed
            if acknowledge is not None:
                acks.append((index, acknowledge))
        return record, tuple(acks) or None

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        """Each interceptor's ``on_acknowledgement``; errors are logged."""
        for index, interceptor in enumerate(self.interceptors):
            try:
                interceptor.on_acknowledgement(metadata, exception)
            except Exception as exc:  # noqa: PERF203 (one try per interceptor, as Java's)
                self._log_error(index, "on_acknowledgement", exc)

    def record_acknowledged(
        self,
        acks: RecordAcks,
        metadata: RecordMetadata | None,
        exception: BaseException | None,
    ) -> None:
        """One record's ``on_send_record`` acknowledgements; errors are logged."""
        for index, acknowledge in acks:
            try:
                acknowledge(metadata, exception)
            except Exception as exc:  # noqa: PERF203
                self._log_error(index, "on_send_record's acknowledgement", exc)

    def on_send_error(
        self,
        topic: str,
        partition: int | None,
        exception: BaseException,
        acks: RecordAcks | None = None,
    ) -> None:
        """A record that failed before it was queued (``send`` raised): its
        acknowledgement, with the metadata Java gives a failed record (``failed_metadata``)."""
        metadata = failed_metadata(topic, partition)
        self.on_acknowledgement(metadata, exception)
        if acks is not None:
            self.record_acknowledged(acks, metadata, exception)

    def wrap(
        self,
        callback: Callback | None,
        topic: str,
        partition: int | None,
        acks: RecordAcks | None = None,
    ) -> Callback:
        """The callback ``send`` queues with the record: the acknowledgement (a failed
        record's with ``failed_metadata``, as Java's), the record's ``acks`` (from
        ``on_send_record``), then the user's ``callback`` (when given, with the
        producer's usual arguments: metadata None for a failed record)."""
        acknowledge = self._acknowledge
        record_acknowledged = self.record_acknowledged

        def acknowledge_then_call(
            metadata: RecordMetadata | None, exception: BaseException | None
        ) -> object:
            acked = metadata
            if metadata is None and exception is not None:
                acked = failed_metadata(topic, partition)
            acknowledge(acked, exception)
            if acks is not None:
                record_acknowledged(acks, acked, exception)
            return None if callback is None else callback(metadata, exception)

        return acknowledge_then_call

    def close(self) -> None:
        """Each interceptor's ``close``; errors are logged."""
        for index, interceptor in enumerate(self.interceptors):
            try:
                interceptor.close()
            except Exception as exc:  # noqa: PERF203
                self._log_error(index, "close", exc)

    def _log_error(self, index: int, method: str, exc: BaseException) -> None:
        """The first error of each (interceptor, method) with its traceback; later ones
        counted and logged at most every ``LOG_INTERVAL_MS``."""
        now_ms = self._monotonic_ms()
        name = type(self.interceptors[index]).__name__
        with self._lock:
            state = self._errors.get((index, method))
            if state is None:
                self._errors[index, method] = [0, now_ms]
                first = True
            else:
                state[0] += 1
                if now_ms - state[1] < LOG_INTERVAL_MS:
                    return
                count, state[0], state[1] = state[0], 0, now_ms
                first = False
        if first:
            log.warning(
                "%sinterceptor %d (%s).%s raised (ignored; the record goes on; later errors of "
                "it are counted)",
                self._prefix,
                index,
                name,
                method,
                exc_info=exc,
            )
        else:
            log.warning(
                "%sinterceptor %d (%s).%s raised %d times more (ignored), the last: %r",
                self._prefix,
                index,
                name,
                method,
                count,
                exc,
            )


def _optional_method(interceptor: object, name: str) -> Callable[..., object] | None:
    method = getattr(interceptor, name, None)
    return method if callable(method) else None


__all__ = [
    "Interceptor",
    "ProducerInterceptor",
    "ProducerInterceptors",
    "ProducerRecord",
    "RecordAcknowledgement",
    "RecordAcks",
    "failed_metadata",
]
