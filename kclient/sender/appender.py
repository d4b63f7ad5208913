"""The common case of ``RecordAccumulator.append``: the partition's open batch has room.

``Appender.append(queues, partition, timestamp_ms, key, value, headers, callback,
size_estimate)`` takes the topic's lock, resolves ``partition`` -1 to the topic's sticky
partition, appends the record to the last batch of that partition's deque, makes its
``FutureRecordMetadata``, registers ``callback`` and counts the record's bytes for the
sticky partitioner; it returns None, having changed nothing, when there is no open batch
or the record does not fit (``RecordAccumulator`` then opens a batch, reserving memory).
``KafkaProducer.send`` calls it directly (``fast_send``: without a Python frame), so the
common case costs one call.

Two implementations doing the same steps: the C ``kclient.sender._speedups.Appender``
(the default when the accelerator is built, with ``TopicQueues.lock`` its C ``Lock``)
and ``PyAppender`` below, the reference, used under ``KCLIENT_PURE_PYTHON=1``. No Java
counterpart as a class: it is the first half of Java's ``RecordAccumulator.append``
(``tryAppend`` on the deque's last batch). Callers' threads.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Protocol

from kclient.errors import IllegalStateError
from kclient.record import _accel
from kclient.sender.batch import Callback, Header
from kclient.sender.future import FutureRecordMetadata
from kclient.sender.topic_queues import BATCH_OVERHEAD, NO_HEADERS, TopicQueues

OpenBatch = Callable[
    [
        TopicQueues,
        int,
        int | None,
        bytes | None,
        bytes | None,
        Sequence[Header] | None,
        Callback | None,
        int,
    ],
    FutureRecordMetadata | None,
]
"""``open_batch(queues, partition, timestamp_ms, key, value, headers, callback,
size_estimate)``: ``send_open``'s record in a new batch, or None (see ``configure_send``)."""


class Appender(Protocol):
    closed: bool
    """Set when the producer closes: ``append`` then raises ``IllegalStateError``."""

    def append(  # noqa: PLR0917 (the per-record hot path passes positionally)
        self,
        queues: TopicQueues,
        partition: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        size_estimate: int,
        /,
    ) -> FutureRecordMetadata | None: ...

    """The record's future, or None when there is no open batch with room; a
    ``timestamp_ms`` of None is now by the wall clock (``time_ns() // 1_000_000``)."""

    def configure_send(
        self,
        queues_by_topic: dict[str, TopicQueues],
        max_record_bytes: int,
        keyed_partition: Callable[[bytes, int], int] | None,
        sticky_keyless: bool,
        open_batch: OpenBatch | None = None,
        /,
    ) -> None:
        """``send_open``'s settings: the producer's topics (``send_open`` appends nothing
        before this is called), records over ``max_record_bytes`` go the general way
        (which refuses them), keys are placed by ``keyed_partition`` (None: keyed records
        go the general way), keyless records to the sticky partition if ``sticky_keyless``
        (else the general way: a custom partitioner). A record the open batch has no room
        for goes to ``open_batch`` (``RecordAccumulator.open_batch_now``: a new batch if
        memory is free now, else None), or the general way if it is None."""

    def send_open(  # noqa: PLR0917
        self,
        topic: str,
        value: object,
        key: object,
        partition: object,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        /,
    ) -> FutureRecordMetadata | None:
        """``KafkaProducer.send``'s common case in one call — bytes (or None) key and
        value, a topic with known partitions, no headers, the built-in partitioner, a
        record within ``max_record_bytes``, an open batch with room — or None, having
        done nothing (``send`` then goes the general way)."""


class PyAppender:
    """The pure-Python ``Appender`` (the reference the C one follows step by step)."""

    __slots__ = (
        "_keyed_partition",
        "_max_record_bytes",
        "_open_batch",
        "_queues_by_topic",
        "_sticky_keyless",
        "_time_ns",
        "closed",
    )

    def __init__(self, time_ns: Callable[[], int]) -> None:
        self.closed = False
        self._time_ns = time_ns
        self._queues_by_topic: dict[str, TopicQueues] = {}  # until configure_send: none
        self._max_record_bytes = -1
        self._keyed_partition: Callable[[bytes, int], int] | None = None
        self._sticky_keyless = False
        self._open_batch: OpenBatch | None = None

    def configure_send(
        self,
        queues_by_topic: dict[str, TopicQueues],
        max_record_bytes: int,
        keyed_partition: Callable[[bytes, int], int] | None,
        sticky_keyless: bool,
        open_batch: OpenBatch | None = None,
        /,
    ) -> None:
        if open_batch is not None and not callable(open_batch):
            raise TypeError("configure_send: open_batch must be callable or None")
        self._queues_by_topic = queues_by_topic
        self._max_record_bytes = max_record_bytes
        self._keyed_partition = keyed_partition
        self._sticky_keyless = sticky_keyless
        self._open_batch = open_batch

    def send_open(  # noqa: PLR0917
        self,
        topic: str,
        value: object,
        key: object,
        partition: object,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        /,
    ) -> FutureRecordMetadata | None:
        if (
            (value is not None and value.__class__ is not bytes)
            or (key is not None and key.__class__ is not bytes)
            or (headers is not None and not (headers.__class__ in (list, tuple) and not headers))
            or (callback is not None and not callable(callback))  # the general way refuses it
        ):
            return None
        queues = self._queues_by_topic.get(topic)
        if queues is None or queues.__class__ is not TopicQueues:
            return None
        count = queues.num_partitions
        if count <= 0:
            return None
        if partition is not None:
            if partition.__class__ is not int or not 0 <= partition < count:
                return None  # not an int (a bool), or not a partition: the general way
            chosen = partition
        elif key is not None:
            if self._keyed_partition is None:
                return None
            chosen = self._keyed_partition(key, count)
        elif self._sticky_keyless:
            chosen = -1
        else:
            return None
        size = 82 + (0 if key is None else len(key)) + (0 if value is None else len(value))
        if size > self._max_record_bytes:
            return None
        future = self.append(queues, chosen, timestamp_ms, key, value, headers, callback, size)
        if future is None and self._open_batch is not None:  # no room: a new batch, memory allowing
            return self._open_batch(
                queues, chosen, timestamp_ms, key, value, headers, callback, size
            )
        return future

    def append(  # noqa: PLR0917
        self,
        queues: TopicQueues,
        partition: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        size_estimate: int,
        /,
    ) -> FutureRecordMetadata | None:
        if timestamp_ms is None:
            timestamp_ms = self._time_ns() // 1_000_000
        lock = queues.lock
        lock.acquire()  # not ``with``: acquire, try/finally, release costs half as much
        try:
            if self.closed:
                raise IllegalStateError("cannot send after the producer is closed")
            sticky = queues.sticky if partition < 0 else None
            if sticky is not None:
                partition = sticky.partition
            dq = queues.deques.get(partition)
            if not dq:
                return None
            batch = dq[-1]
            if batch.records is not None:  # built, back for a retry: takes no more
                return None
            future = batch.try_append(
                timestamp_ms, key, value, NO_HEADERS if headers is None else headers, callback
            )
            if future is None:
                return None
            if sticky is not None:
                produced = sticky.produced_bytes + size_estimate - BATCH_OVERHEAD
                sticky.produced_bytes = produced
                if produced >= sticky.sticky_bytes:
                    sticky.maybe_switch(batch)
            return future
        finally:
            lock.release()


def make_appender(time_ns: Callable[[], int], *, pure_python: bool = False) -> Appender:
    """The C ``Appender`` when the accelerator is built (and ``pure_python`` is false);
    ``time_ns`` is the wall clock record timestamps are read from."""
    if _accel.ACCELERATED and not pure_python:
        from kclient.sender._speedups import Appender as CAppender

        appender: Appender = CAppender(
            FutureRecordMetadata, BATCH_OVERHEAD, IllegalStateError, time_ns
        )
        return appender
    return PyAppender(time_ns)


def fast_send(
    producer: object,
    appender: Appender,
    send: Callable[..., FutureRecordMetadata],
    general: Callable[..., FutureRecordMetadata],
) -> Callable[..., FutureRecordMetadata] | None:
    """``producer``'s ``send`` in C — the C ``SendCall``: ``appender.send_open`` without a
    Python frame, else ``general(producer, topic, value, key, headers, partition,
    timestamp_ms, callback)``; a call it cannot bind goes to ``send(producer, ...)`` — or
    None without the accelerator (or with the Python appender). It holds ``producer``
    weakly: the producer keeps it as its ``send`` attribute."""
    if not _accel.ACCELERATED:
        return None
    from kclient.sender._speedups import Appender as CAppender
    from kclient.sender._speedups import SendCall

    if not isinstance(appender, CAppender):
        return None
    call: Callable[..., FutureRecordMetadata] = SendCall(
        appender, weakref.ref(producer), send, general
    )
    return call
