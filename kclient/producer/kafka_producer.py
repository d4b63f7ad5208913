"""KafkaProducer: Java's ``KafkaProducer`` — the public, thread-safe producer.

``send`` runs on the caller's thread and never does network I/O: it serializes, picks
the partition, appends to the ``RecordAccumulator`` and returns a future. One background
thread (the ``Sender``, named ``kclient-producer-network-thread | <client.id>``) does all
the I/O. Any number of threads may call ``send`` at once.

Differences from Java: caller mistakes and timeouts in ``send`` (``RecordTooLargeError``,
``SerializationError``, ``KafkaTimeoutError`` for metadata, ``BufferExhaustedError``)
raise from ``send`` instead of being returned as a failed future. ``flush`` and ``close``
take an optional timeout in seconds. A producer created before ``os.fork()`` cannot be
used in the child: create it after the fork.

The transaction methods are in ``ProducerTransactions`` (``transactions.py``),
``send_batch`` in ``ProducerBatches`` (``send_batch.py``) and the wait for a topic's
metadata in ``ProducerMetadataWait`` (``metadata_wait.py``), base classes of this one.
With ``interceptors`` set, ``send`` runs them around the general path
(``interceptors.py``); without, they cost nothing.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from kclient import serialization
from kclient.clock import SYSTEM_CLOCK, Clock
from kclient.config import ProducerConfig
from kclient.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from kclient.network import NetworkClient, NetworkClientConfig
from kclient.network.cluster import PartitionInfo
from kclient.network.kafka_client import KafkaClient
from kclient.producer import record_args
from kclient.producer.interceptors import ProducerInterceptors, ProducerRecord, RecordAcks
from kclient.producer.metadata_wait import ProducerMetadataWait
from kclient.producer.send_batch import ProducerBatches
from kclient.producer.telemetry import client_instance_id, telemetry_sender
from kclient.producer.transactions import ProducerTransactions
from kclient.record import CompressionType, RecordBatchBuilder
from kclient.sender import transaction_manager
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.appender import fast_send
from kclient.sender.batch import Callback, Header
from kclient.sender.buffer_pool import BufferPool
from kclient.sender.future import FutureRecordMetadata
from kclient.sender.idempotence import TransactionManager
from kclient.sender.metrics import SenderMetrics
from kclient.sender.partitioner import keyed_partition
from kclient.sender.sender import Sender
from kclient.sender.topic_queues import TopicQueues, estimate_size_upper_bound
from kclient.stats import start_statistics

log = logging.getLogger(__name__)

_live_producers: weakref.WeakSet[KafkaProducer] = weakref.WeakSet()
_FORKED = (
    "this KafkaProducer was created before os.fork() and cannot be used in the child "
    "process; create the producer after the fork"
)
_CLOSED = "cannot send after the producer is closed"


def _after_fork_in_child() -> None:
    for producer in list(_live_producers):
        producer._mark_forked()


def _close_at_exit() -> None:
    for producer in list(_live_producers):
        if producer._unusable is None:
            producer.close()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)


class KafkaProducer(ProducerBatches, ProducerTransactions, ProducerMetadataWait):
    """Sends records to Kafka; see the module docstring and ``ProducerConfig``.

    ``KafkaProducer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})`` or
    ``KafkaProducer(bootstrap_servers="127.0.0.1:9092", linger_ms=5)``. ``kafka_client``
    and ``clock`` replace the network client and the clock (tests).
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        /,
        *,
        kafka_client: KafkaClient | None = None,
        clock: Clock | None = None,
        **settings: object,
    ) -> None:
        self.config = cfg = ProducerConfig(config, **settings)
        self._clock = clock = clock if clock is not None else SYSTEM_CLOCK
        self._prefix = f"[kclient producer clientId={cfg.client_id}] "
        self._unusable: str | KafkaError | None = None
        """Why ``send`` must fail: closed, forked, or the producer's fatal error."""
        if kafka_client is None:
            kafka_client = NetworkClient.create(
                cfg.bootstrap_servers, _network_config(cfg), clock=clock
            )
        self._client = kafka_client
        self._metadata = kafka_client.metadata
        self._txn: transaction_manager.TransactionManager | None = None
        self._tm: TransactionManager | None = None
        if cfg.transactional_id is not None:
            self._tm = self._txn = transaction_manager.TransactionManager(
                cfg.transactional_id,
                cfg.transaction_timeout_ms,
                cfg.retry_backoff_ms,
                self._prefix,
            )
        elif cfg.enable_idempotence:
            self._tm = TransactionManager(self._prefix)
        self_ref = weakref.ref(self)  # the I/O thread must not keep us alive
        if self._tm is not None:
            self._tm.on_fatal_error = lambda error: _set_fatal_error(self_ref, error)
        self._pool = BufferPool(cfg.buffer_memory, clock)
        codec = CompressionType.from_name(cfg.compression_type)
        level = cfg.compression_level()
        transactional = self._txn is not None
        # record timestamps: the system clock directly on the hot path, else the injected one
        self._time_ns = time_ns = (
            time.time_ns if clock is SYSTEM_CLOCK else (lambda: clock.time_ms() * 1_000_000)
        )
        self._accumulator = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            pool=self._pool,
            builder_factory=lambda size: RecordBatchBuilder(
                codec, size, level, is_transactional=transactional
            ),
            transaction_manager=self._tm,
            monotonic_ms=clock.monotonic_ms,
            wall_time_ns=time_ns,
        )
        self._sender = Sender(
            kafka_client,
            self._accumulator,
            clock=clock,
            acks=cfg.acks,
            max_request_size=cfg.max_request_size,
            request_timeout_ms=cfg.request_timeout_ms,
            retries=cfg.retries,
            retry_backoff_ms=cfg.retry_backoff_ms,
            guarantee_message_order=cfg.max_in_flight_requests_per_connection == 1,
            transaction_manager=self._tm,
            metrics=SenderMetrics(clock.monotonic_ms),
            telemetry=telemetry_sender(self, cfg, kafka_client, clock, self._prefix),
            log_prefix=self._prefix,
        )
        self._accumulator.wakeup = self._sender.wakeup
        self._sender.on_failure = lambda error: _set_fatal_error(self_ref, error)
        self._key_serializer = serialization.resolve(cfg.key_serializer, "key.serializer")
        self._value_serializer = serialization.resolve(cfg.value_serializer, "value.serializer")
        self._partitioner = cfg.partitioner
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._max_block_ms = cfg.max_block_ms
        self._max_record_bytes = min(cfg.max_request_size, cfg.buffer_memory)
        self._serializers = self._key_serializer is not None or self._value_serializer is not None
        self._interceptors = (
            ProducerInterceptors(cfg.interceptors, clock.monotonic_ms, self._prefix, cfg)
            if cfg.interceptors
            else None
        )
        """``interceptors``: None when there are none (then nothing of them runs)."""
        self._ack_send_errors = True
        """A ``send`` that raises is acknowledged to the interceptors (``kclient.aio``,
        which tries again after a ``KafkaTimeoutError``, acknowledges only its last try's,
        and runs ``on_send`` once before the first: ``_send_intercepted``)."""
        self._checked_send = (
            self._serializers or self._txn is not None or self._interceptors is not None
        )
        """Whether ``send`` must check more than its arguments' types (serializers, a
        transaction, interceptors, closed, forked or failed): one test on the common
        path."""
        self._append = self._accumulator.append
        self._append_open = self._accumulator.appender.append
        self._queues: dict[str, TopicQueues] = {}
        self._send_open = self._accumulator.appender.send_open
        self._accumulator.appender.configure_send(
            self._queues,
            self._max_record_bytes,
            None if self._partitioner is not None or self._ignore_keys else keyed_partition,
            self._partitioner is None,
            self._accumulator.open_batch_now,
        )
        if not self._checked_send and type(self).send is KafkaProducer.send:
            # producer.send: its common case in C when built; dropped (the class's send again)
            # once send must check more than its arguments' types (closed, forked, failed)
            call = fast_send(
                self, self._accumulator.appender, KafkaProducer.send, type(self)._send_general
            )
            if call is not None:
                self.__dict__["send"] = call
        self._close_lock = threading.Lock()
        self._waiters_lock = threading.Lock()
        self._metadata_waiters: dict[str, int] = {}
        """Callers waiting for a topic's metadata (under ``_waiters_lock``): the last to
        give up on a topic with nothing queued makes the metadata forget it."""
        self._thread = threading.Thread(
            target=self._sender.run,
            name=f"kclient-producer-network-thread | {cfg.client_id}",
            daemon=True,
        )
        self._start_io()
        self._statistics = start_statistics(self, cfg)  # stats_cb, librdkafka's
        _live_producers.add(self)
        log.info("%sstarted (bootstrap.servers=%s)", self._prefix, ",".join(cfg.bootstrap_servers))

    def _start_io(self) -> None:
        """Start the I/O thread (``kclient.aio`` runs the Sender on its event loop instead)."""
        self._thread.start()

    # ---- send ----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        headers: Sequence[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> FutureRecordMetadata:
        """Queue a record; returns a future of its ``RecordMetadata``.

        ``callback(metadata, exception)`` runs on the producer's I/O thread once the
        record is acknowledged or failed; its exceptions are logged. Raises
        ``RecordTooLargeError``, ``SerializationError``, ``KafkaTimeoutError`` (topic
        metadata or buffer memory unavailable for ``max.block.ms``) or
        ``IllegalStateError`` (after close).
        """
        if not self._checked_send:
            future = self._send_open(topic, value, key, partition, timestamp_ms, headers, callback)
            if future is not None:  # the common case, in one call (C when built)
                return future
        return self._send_general(topic, value, key, headers, partition, timestamp_ms, callback)

    def _send_general(  # noqa: PLR0917 (send's arguments, positionally: the C send calls it)
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Sequence[Header] | None,
        partition: int | None,
        timestamp_ms: int | None,
        callback: Callback | None,
        serialize: bool = True,
    ) -> FutureRecordMetadata:
        """``send`` beyond its common case: interceptors, serializers, conversions, a
        transaction, a closed producer, metadata to wait for, headers, a custom
        partitioner, a record too large, a new batch."""
        interceptors = self._interceptors
        if interceptors is None:
            return self._send_record(
                topic, value, key, headers, partition, timestamp_ms, callback, serialize
            )
        record, acks = interceptors.on_send_record(
            ProducerRecord(topic, value, key, headers, partition, timestamp_ms)
        )
        topic, value, key, headers, partition, timestamp_ms = record
        return self._send_intercepted(
            topic, value, key, headers, partition, timestamp_ms, callback, serialize, acks
        )

    def _send_intercepted(  # noqa: PLR0917 (send's arguments, positionally)
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Sequence[Header] | None,
        partition: int | None,
        timestamp_ms: int | None,
        callback: Callback | None,
        serialize: bool = True,
        acks: RecordAcks | None = None,
    ) -> FutureRecordMetadata:
        """``send`` of a record the interceptors' ``on_send`` returned (``kclient.aio``
        calls it directly when it tries a record again): its callback acknowledges it (and
        its ``acks``, from ``on_send_record``), and so does an error raised here."""
        interceptors = self._interceptors
        assert interceptors is not None
        try:
            return self._send_record(
                topic,
                value,
                key,
                headers,
                partition,
                timestamp_ms,
                interceptors.wrap(callback, topic, partition, acks),
                serialize,
            )
        except Exception as exc:  # Java's onSendError: the record is acknowledged failed
            if self._ack_send_errors or not isinstance(exc, KafkaTimeoutError):
                interceptors.on_send_error(topic, partition, exc, acks)
            raise

    def _send_record(  # noqa: PLR0917 (send's arguments, positionally)
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Sequence[Header] | None,
        partition: int | None,
        timestamp_ms: int | None,
        callback: Callback | None,
        serialize: bool,
    ) -> FutureRecordMetadata:
        """``_send_general`` after the interceptors."""
        if topic.__class__ is not str:
            topic = record_args.checked_topic(topic)
        if partition is not None and partition.__class__ is not int:
            partition = record_args.checked_partition(partition)
        if timestamp_ms is not None and (timestamp_ms.__class__ is not int or timestamp_ms < 0):
            timestamp_ms = record_args.checked_timestamp(timestamp_ms)
        if headers:
            headers = record_args.checked_headers(headers)
        if callback is not None and not callable(callback):
            raise TypeError(
                "send() callback must be a callable taking (metadata, exception), or None; "
                f"got {callback!r} ({type(callback).__name__})"
            )
        if self._checked_send:
            key, value = self._check_send(topic, key, value, serialize)
        else:
            if value is not None and value.__class__ is not bytes:
                value = serialization.to_bytes("value", value)
            if key is not None and key.__class__ is not bytes:
                key = serialization.to_bytes("key", key)
        queues = self._queues.get(topic)
        if (
            queues is None
            or not queues.num_partitions
            or (partition is not None and partition >= queues.num_partitions)
        ):
            queues, block_ms = self._wait_on_metadata(topic, partition)
        else:
            block_ms = self._max_block_ms
        if partition is None:
            if key is not None or self._partitioner is not None:
                partition = self._choose_partition(topic, key, queues.num_partitions)
            else:
                partition = -1  # the topic's sticky partition, chosen by the accumulator
        elif partition < 0:
            raise ValueError(f"partition must be >= 0 or None, got {partition}")
        if headers:
            size = estimate_size_upper_bound(key, value, headers)
        elif key is None:
            size = 82 if value is None else 82 + len(value)
        else:
            size = 82 + len(key) + (0 if value is None else len(value))
        if size > self._max_record_bytes:
            self._record_too_large(size)
        # timestamp_ms None: the accumulator reads the wall clock (in C when built)
        future = self._append_open(
            queues, partition, timestamp_ms, key, value, headers, callback, size
        )
        if future is not None:  # the common case: the open batch had room
            return future
        return self._append(
            queues, partition, timestamp_ms, key, value, headers, callback, block_ms, size
        )

    def _check_send(
        self, topic: str, key: Any, value: Any, serialize: bool = True
    ) -> tuple[bytes | None, bytes | None]:
        """``send``'s checks beyond the common case: closed/forked/failed, the transaction
        state, serializers (unless ``serialize`` is False); the key and value as bytes."""
        if self._unusable is not None:
            self._raise_unusable()
        if self._txn is not None:
            self._txn.check_send()
        if self._serializers and serialize:
            return self._serialize(topic, key, value)
        if value is not None and value.__class__ is not bytes:
            value = serialization.to_bytes("value", value)
        if key is not None and key.__class__ is not bytes:
            key = serialization.to_bytes("key", key)
        return key, value

    def _serialize(self, topic: str, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        if self._key_serializer is not None:
            key = serialization.apply(self._key_serializer, "key", topic, key)
        elif key is not None and key.__class__ is not bytes:
            key = serialization.to_bytes("key", key)
        if self._value_serializer is not None:
            value = serialization.apply(self._value_serializer, "value", topic, value)
        elif value is not None and value.__class__ is not bytes:
            value = serialization.to_bytes("value", value)
        return key, value

    def _choose_partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        """A custom partitioner's choice, Java's murmur2 of the key, or -1 (sticky)."""
        if self._partitioner is not None:
            return self._custom_partition(topic, key, num_partitions)
        if key is not None and not self._ignore_keys:
            return keyed_partition(key, num_partitions)
        return -1

    def _raise_unusable(self) -> None:
        unusable = self._unusable
        if isinstance(unusable, BaseException):
            raise unusable
        raise IllegalStateError(unusable)

    def _custom_partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        assert self._partitioner is not None
        chosen = self._partitioner(topic, key, num_partitions)
        if (
            isinstance(chosen, bool)
            or not isinstance(chosen, int)
            or not 0 <= chosen < num_partitions
        ):
            raise ValueError(
                f"the partitioner returned {chosen!r} for topic {topic!r} "
                f"with {num_partitions} partitions"
            )
        return chosen

    def _record_too_large(self, size: int) -> None:
        cfg = self.config
        if size > cfg.max_request_size:
            raise RecordTooLargeError(
                f"the record is {size} bytes when serialized, larger than 'max.request.size' "
                f"({cfg.max_request_size} bytes)"
            )
        raise RecordTooLargeError(
            f"the record is {size} bytes when serialized, larger than 'buffer.memory' "
            f"({cfg.buffer_memory} bytes)"
        )

    # ---- flush / close -------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything now and wait until every record sent before this call completed
        (delivered or failed). Raises ``KafkaTimeoutError`` after ``timeout`` seconds."""
        if self._unusable == _FORKED:
            raise IllegalStateError(_FORKED)
        if threading.current_thread() is self._thread:
            raise IllegalStateError(
                "flush() inside a send callback would deadlock; it is not permitted"
            )
        timeout = _checked_timeout("flush", timeout)
        up_to = self._accumulator.begin_flush()
        try:
            self._sender.wakeup()
            if not self._accumulator.await_flush_completion(up_to, timeout):
                raise KafkaTimeoutError(f"flush() did not complete within {timeout} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Deliver what was sent (waiting up to ``timeout`` seconds; None = until every record
        is delivered or has failed, at most ``delivery.timeout.ms``, then up to
        ``request.timeout.ms`` for a transaction's requests and as much to abort a
        transaction left open), then fail what is left, stop the I/O thread and close the
        connections. Calling it again does nothing."""
        timeout = _checked_timeout("close", timeout)
        if timeout is None:  # the Sender keeps these bounds; this is the backstop
            cfg = self.config
            timeout = (cfg.delivery_timeout_ms + 2 * cfg.request_timeout_ms) / 1000 + 1
        with self._close_lock:
            if self._unusable == _FORKED:
                return  # the I/O thread and sockets belong to the parent process
            self._mark_closed()
            if self._statistics is not None:
                self._statistics.stop()
            if threading.current_thread() is self._thread:
                log.warning(
                    "%sclose() called from a send callback: closing without waiting", self._prefix
                )
                self._sender.force_close()
                return
            log.info("%sclosing (timeout %s s)", self._prefix, timeout)
            if timeout > 0:  # close(0) forces at once, as Java's: nothing is given time to land
                self._sender.initiate_close()
                self._thread.join(timeout)
            if self._thread.is_alive():
                if self._accumulator.incomplete:  # else only the thread's own wind-down
                    log.warning(
                        "%sclose timed out; failing the records not yet delivered", self._prefix
                    )
                self._sender.force_close()
                self._thread.join()
            self._pool.close()
            self._metadata.close()
            _live_producers.discard(self)
            if self._interceptors is not None:  # after the last acknowledgement
                self._interceptors.close()

    def _mark_closed(self) -> None:
        """From now on ``send`` raises IllegalStateError (closed)."""
        self._unusable = _CLOSED
        self._checked_send = True
        self.__dict__.pop("send", None)

    def _mark_forked(self) -> None:
        self._unusable = _FORKED
        self._checked_send = True
        self.__dict__.pop("send", None)

    def _set_fatal_error(self, error: KafkaError) -> None:
        if self._unusable is None:
            self._unusable = error
            self._checked_send = True
            self.__dict__.pop("send", None)

    def __del__(self) -> None:
        # Dropped without close(): let the I/O thread deliver what it has, then stop.
        try:
            if self._unusable not in (_CLOSED, _FORKED) and self._thread.is_alive():
                self._sender.initiate_close()
        except Exception:  # interpreter shutdown, or __init__ failed half-way
            pass

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- information ---------------------------------------------------------------------

    def partitions_for(self, topic: str) -> list[PartitionInfo]:
        """The topic's partitions (waits up to ``max.block.ms`` for its metadata)."""
        if topic.__class__ is not str:
            topic = record_args.checked_topic(topic)
        if self._unusable == _CLOSED:
            raise IllegalStateError("partitions_for() is not allowed: the producer is closed")
        if self._unusable is not None:
            self._raise_unusable()
        self._wait_on_metadata(topic, None)
        return list(self._metadata.fetch().partitions_for_topic(topic))

    def metrics(self) -> dict[str, float]:
        """The producer's metrics by Java name (rates per second, sizes in bytes, ms)."""
        values = self._sender.metrics.snapshot()
        values["buffer-available-bytes"] = float(self._pool.available_bytes)
        values["buffer-total-bytes"] = float(self._pool.total_bytes)
        values["bufferpool-wait-time"] = float(self._pool.wait_time_ns_total)
        values["bufferpool-wait-time-ns-total"] = float(self._pool.wait_time_ns_total)
        values["requests-in-flight"] = float(self._client.in_flight_request_count())
        return values

    def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The id the cluster assigned this producer for its metrics (KIP-714, Java's
        ``clientInstanceId``), waiting up to ``timeout`` seconds for it; None when none
        came (the cluster does not accept client metrics, or the time ran out).
        ``IllegalStateError`` with ``enable.metrics.push=false``."""
        return client_instance_id(self._sender.telemetry, timeout)

    def __repr__(self) -> str:
        state = str(self._unusable or "open")
        return f"<KafkaProducer client.id={self.config.client_id!r} {state}>"


def _checked_timeout(method: str, timeout: object) -> float | None:
    """``flush``/``close``'s timeout: seconds >= 0, or None (as Java refuses a negative one)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(
            f"{method}() timeout must be a number of seconds or None, got {type(timeout).__name__}"
        )
    if not timeout >= 0:  # also NaN
        raise ValueError(f"{method}() timeout must be >= 0 seconds or None, got {timeout}")
    return float(timeout)


def _set_fatal_error(producer_ref: weakref.ref[KafkaProducer], error: KafkaError) -> None:
    producer = producer_ref()
    if producer is not None:
        producer._set_fatal_error(error)


def _network_config(cfg: ProducerConfig) -> NetworkClientConfig:
    return NetworkClientConfig.from_config(cfg)
