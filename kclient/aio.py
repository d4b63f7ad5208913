"""An asyncio producer with aiokafka's ``AIOKafkaProducer`` surface, over kclient's producer.

    from kclient.aio import AIOKafkaProducer

    async with AIOKafkaProducer(bootstrap_servers="127.0.0.1:9092") as producer:
        metadata = await producer.send_and_wait("events", b"hello", key=b"k")

Design: the I/O stays on the producer's Sender thread (``KafkaProducer``), and ``send``
never blocks the event loop. The inner producer runs with ``max.block.ms=0``: where the
synchronous ``send`` would block (topic metadata not there yet, ``buffer.memory`` full) it
fails at once, and ``send`` here awaits (short sleeps, 1 ms doubling to 50 ms, waking the
Sender for metadata) and tries again until the user's ``max_block_ms`` (default 60000)
runs out. A cancelled ``send`` has queued nothing; a ``send`` that returned has queued
its record, which is then delivered or failed and reported through the future it
returned. Completions cross from the Sender thread in bursts: one
``loop.call_soon_threadsafe`` per burst of acknowledgements, not per record.

Thread contract: call every method from the event loop that ran ``start()``. After
``stop()`` no thread of this producer is left running.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from typing import Any

from kclient.errors import (
    BufferExhaustedError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kclient.producer import KafkaProducer
from kclient.sender.batch import Header
from kclient.sender.future import RecordMetadata

__all__ = ["AIOKafkaProducer", "BatchBuilder"]

log = logging.getLogger(__name__)

#: aiokafka's constructor keywords and the settings they are.
AIOKAFKA_NAMES = {
    "bootstrap_servers": "bootstrap.servers",
    "client_id": "client.id",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "request_timeout_ms": "request.timeout.ms",
    "acks": "acks",
    "key_serializer": "key.serializer",
    "value_serializer": "value.serializer",
    "compression_type": "compression.type",
    "max_batch_size": "batch.size",
    "max_request_size": "max.request.size",
    "linger_ms": "linger.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "security_protocol": "security.protocol",
    "ssl_context": "ssl.context",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "enable_idempotence": "enable.idempotence",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
}
_UNSUPPORTED = {
    "transactional_id": "transactions are not supported by kclient.aio yet",
    "transaction_timeout_ms": "transactions are not supported by kclient.aio yet",
    "sasl_kerberos_service_name": "SASL GSSAPI (Kerberos) is not supported by kclient",
    "sasl_kerberos_domain_name": "SASL GSSAPI (Kerberos) is not supported by kclient",
    "sasl_oauth_token_provider": "SASL OAUTHBEARER is not supported by kclient",
}
#: Defaults that differ from ``KafkaProducer``'s, as aiokafka's: no linger.
_DEFAULTS = {"linger.ms": 0}
_FIRST_WAIT_S = 0.001
_MAX_WAIT_S = 0.05


def _settings(kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """aiokafka keywords and Kafka's names → producer settings, and ``max.block.ms``."""
    settings: dict[str, Any] = dict(_DEFAULTS)
    for name, value in kwargs.items():
        if name in _UNSUPPORTED:
            raise ConfigError(f"{name!r}: {_UNSUPPORTED[name]}")
        if name == "loop":
            if value is not None:
                raise ConfigError("'loop' is not supported: the producer uses the running loop")
            continue
        if name == "api_version":
            if value not in (None, "auto"):
                raise ConfigError(
                    f"'api_version' {value!r} is not supported: kclient asks each broker "
                    "(ApiVersions) and uses the newest versions both support; leave it out"
                )
            continue
        if name == "partitioner" and value is not None:
            value = _adapt_partitioner(value)
        if name == "compression_type" and value is None:
            value = "none"
        if name == "bootstrap_servers" and not isinstance(value, str):
            value = ",".join(value)
        settings[AIOKAFKA_NAMES.get(name, name)] = value
    max_block_ms = settings.pop("max.block.ms", settings.pop("max_block_ms", 60_000))
    if not isinstance(max_block_ms, int) or isinstance(max_block_ms, bool) or max_block_ms < 0:
        raise ConfigError(f"'max.block.ms' must be a non-negative int, got {max_block_ms!r}")
    return settings, max_block_ms


def _adapt_partitioner(partitioner: Any) -> Callable[[str, bytes | None, int], int]:
    """aiokafka calls ``partitioner(key_bytes, all_partitions, available_partitions)``."""

    def partition(topic: str, key: bytes | None, num_partitions: int) -> int:
        partitions = list(range(num_partitions))
        return int(partitioner(key, partitions, partitions))

    return partition


class BatchBuilder:
    """Records for one ``send_batch`` (aiokafka's ``BatchBuilder``): ``append`` until it
    returns None (full: ``max_batch_size`` bytes, or closed)."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._size = 0
        self._closed = False
        self.records: list[tuple[int | None, bytes | None, bytes | None, list[Header]]] = []

    def append(
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> object | None:
        """Add a record; None when it does not fit (the first record always fits)."""
        size = 21 + len(key or b"") + len(value or b"")
        size += sum(len(k) + len(v or b"") + 10 for k, v in headers)
        if self._closed or (self.records and self._size + size > self._max_size):
            return None
        self.records.append((timestamp, key, value, list(headers)))
        self._size += size
        return _Appended(size, timestamp)

    def record_count(self) -> int:
        return len(self.records)

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self._closed = True


class _Appended:
    """What ``BatchBuilder.append`` returns (aiokafka gives the record's size and time)."""

    def __init__(self, size: int, timestamp: int | None) -> None:
        self.size = size
        self.timestamp = timestamp
        self.crc = None


class AIOKafkaProducer:
    """``await start()``, ``await send(...)`` → a future of ``RecordMetadata``,
    ``await stop()``. Keywords: aiokafka's (``bootstrap_servers``, ``linger_ms``, ...)
    or any kclient setting under its Kafka name or in snake_case."""

    def __init__(self, **kwargs: Any) -> None:
        self._settings, self._max_block_ms = _settings(kwargs)
        self._kafka_client = self._settings.pop("kafka_client", None)  # tests
        self._producer: KafkaProducer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        self._done: collections.deque[
            tuple[asyncio.Future[RecordMetadata], RecordMetadata | None, BaseException | None]
        ] = collections.deque()
        self._scheduled = False
        self._pending: set[asyncio.Future[RecordMetadata]] = set()

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Create the producer and wait (up to ``request_timeout_ms``) for the cluster's
        metadata; raises ``KafkaConnectionError`` if no bootstrap server answers."""
        if self._producer is not None or self._stopped:
            raise IllegalStateError("start() was already called on this producer")
        self._loop = asyncio.get_running_loop()
        settings = {**self._settings, "max.block.ms": 0}
        producer = KafkaProducer(settings, kafka_client=self._kafka_client)
        self._producer = producer
        metadata = producer._metadata
        metadata.request_update()
        producer._sender.wakeup()
        deadline = self._loop.time() + producer.config.request_timeout_ms / 1000
        wait_s = _FIRST_WAIT_S
        while metadata.fetch().is_bootstrap_configured:
            if self._loop.time() >= deadline:
                await self.stop()
                raise KafkaConnectionError(
                    f"no bootstrap server of {','.join(producer.config.bootstrap_servers)} "
                    f"answered within 'request.timeout.ms' "
                    f"({producer.config.request_timeout_ms} ms)"
                )
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, _MAX_WAIT_S)

    async def stop(self) -> None:
        """Deliver what was sent (or fail it at ``delivery.timeout.ms``), then close.
        Calling it again does nothing."""
        producer = self._producer
        if producer is None or self._stopped:
            self._stopped = True
            return
        self._stopped = True
        try:
            await self.flush()
        finally:
            producer.close(timeout=5.0)
            self._deliver()

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ---- send ----------------------------------------------------------------------------

    def _started(self) -> KafkaProducer:
        if self._producer is None or self._stopped:
            state = "stopped" if self._stopped else "not started (await start() first)"
            raise IllegalStateError(f"the producer is {state}")
        return self._producer

    async def send(  # noqa: PLR0917 -- aiokafka's signature
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a record; returns a future of its ``RecordMetadata``. Awaits (without
        blocking the loop) topic metadata and ``buffer.memory`` up to ``max_block_ms``."""
        self._started()
        assert self._loop is not None
        future: asyncio.Future[RecordMetadata] = self._loop.create_future()
        callback = self._callback(future)

        def attempt() -> None:
            self._started().send(
                topic,
                value,
                key,
                headers=headers,
                partition=partition,
                timestamp_ms=timestamp_ms,
                callback=callback,
            )

        try:
            attempt()
        except KafkaTimeoutError as exc:
            await self._send_when_possible(exc, attempt, topic, partition)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    async def _send_when_possible(
        self,
        error: KafkaTimeoutError,
        attempt: Callable[[], None],
        topic: str,
        partition: int | None,
    ) -> None:
        """Try again after short sleeps until the record is queued or ``max_block_ms``
        ran out; the record is queued at most once (by the attempt that returns)."""
        loop = self._loop
        assert loop is not None
        deadline = loop.time() + self._max_block_ms / 1000
        wait_s = _FIRST_WAIT_S
        while True:
            producer = self._started()
            if not isinstance(error, BufferExhaustedError):
                producer._metadata.request_update_for_topic(topic)
                producer._sender.wakeup()
            remaining_s = deadline - loop.time()
            if remaining_s <= 0:
                raise self._blocked_too_long(error, topic, partition) from error
            await asyncio.sleep(min(wait_s, remaining_s))
            wait_s = min(wait_s * 2, _MAX_WAIT_S)
            try:
                attempt()
                return
            except KafkaTimeoutError as exc:
                error = exc

    def _blocked_too_long(
        self, error: KafkaTimeoutError, topic: str, partition: int | None
    ) -> KafkaTimeoutError:
        ms = self._max_block_ms
        if isinstance(error, BufferExhaustedError):
            return BufferExhaustedError(
                f"'buffer.memory' stayed full for 'max_block_ms' ({ms} ms); the broker is not "
                "keeping up or unreachable"
            )
        what = f"topic {topic!r}"
        if partition is not None:
            what = f"partition {partition} of {what}"
        return KafkaTimeoutError(
            f"{what} not present in metadata after {ms} ms ('max_block_ms'): {error}"
        )

    async def send_and_wait(  # noqa: PLR0917 -- aiokafka's signature
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> RecordMetadata:
        """``await (await send(...))``."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self._started().config.batch_size)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a batch's records to one partition, in order; the future gives the first
        record's metadata once all are acknowledged (or the first error)."""
        batch.close()
        futures = [
            await self.send(topic, value, key, partition, timestamp, headers)
            for timestamp, key, value, headers in batch.records
        ]
        assert self._loop is not None
        if not futures:
            raise ValueError("send_batch() of an empty batch")
        return asyncio.ensure_future(self._first_of(futures))

    @staticmethod
    async def _first_of(futures: list[asyncio.Future[RecordMetadata]]) -> RecordMetadata:
        results = await asyncio.gather(*futures)
        return results[0]

    async def flush(self) -> None:
        """Send everything queued now and wait until each record sent before this call
        is acknowledged or failed."""
        producer = self._started() if not self._stopped else self._producer
        if producer is None:
            return
        waiting = list(self._pending)
        accumulator = producer._accumulator
        accumulator.begin_flush()
        try:
            producer._sender.wakeup()
            if waiting:
                await asyncio.wait(waiting)
        finally:
            accumulator.end_flush()

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids, awaiting its metadata up to ``max_block_ms``."""
        producer = self._started()
        loop = self._loop
        assert loop is not None
        deadline = loop.time() + self._max_block_ms / 1000
        wait_s = _FIRST_WAIT_S
        while True:
            try:
                return {p.partition for p in producer.partitions_for(topic)}
            except KafkaTimeoutError as exc:
                producer._metadata.request_update_for_topic(topic)
                producer._sender.wakeup()
                if loop.time() >= deadline:
                    raise self._blocked_too_long(exc, topic, None) from exc
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, _MAX_WAIT_S)

    # ---- completions (from the Sender thread) --------------------------------------------

    def _callback(
        self, future: asyncio.Future[RecordMetadata]
    ) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        done = self._done

        def completed(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            done.append((future, metadata, error))
            if not self._scheduled:
                self._scheduled = True
                loop = self._loop
                assert loop is not None
                try:
                    loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop was closed without stop()
                    log.warning("a record completed after its event loop was closed")

        return completed

    def _deliver(self) -> None:
        """On the loop: settle every future completed since the last call."""
        self._scheduled = False
        done = self._done
        while done:
            future, metadata, error = done.popleft()
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                assert metadata is not None
                future.set_result(metadata)

    def metrics(self) -> dict[str, float]:
        return self._started().metrics()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("started" if self._producer else "new")
        return f"<kclient.aio.AIOKafkaProducer {state}>"
