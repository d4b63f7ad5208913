"""AIOKafkaProducer: aiokafka's asyncio producer surface over kclient's ``KafkaProducer``.

Design: the producer's Sender runs on the event loop (``LoopProducer``,
``kclient/aio/loop_sender.py``): no I/O thread; records complete inside the Sender's step,
on the loop, and their futures are settled there, one pass per produced batch
(``BatchCompletions``, ``kclient/aio/completions.py``). ``send`` never blocks the
loop: the inner producer runs with ``max.block.ms=0``, so where the synchronous ``send``
would block (topic metadata not there yet, ``buffer.memory`` full) it fails at once, and
``send`` here awaits (short sleeps, 1 ms doubling to 50 ms, waking the Sender for
metadata) and tries again until the user's ``max_block_ms`` (default 60000) runs out. A
cancelled ``send`` has queued nothing; a ``send`` that returned has queued its record,
which is then delivered or failed and reported through the future it returned. Its
common case queues the record at the call and returns an awaitable already done (no
coroutine).

A scripted ``kafka_client`` (tests) without ``on_ready`` keeps the Sender on its own
thread, as ``KafkaProducer`` has it; completions then cross to the loop in bursts, one
``loop.call_soon_threadsafe`` per burst of acknowledgements.

Thread contract: call every method from the event loop that ran ``start()``. After
``stop()`` no thread of this producer is left running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kclient.aio.batch import BatchBuilder, BatchDelivery
from kclient.aio.completions import BatchCompletions, Future
from kclient.aio.config import producer_settings
from kclient.aio.loop_sender import LoopProducer
from kclient.aio.threaded import ThreadCompletions
from kclient.aio.transactions import TransactionContext, aiokafka_offsets, await_result
from kclient.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kclient.network import NetworkClient
from kclient.oauth.login import OAuthBearerCredentials
from kclient.producer import KafkaProducer
from kclient.producer.interceptors import ProducerRecord, RecordAcks
from kclient.sender.batch import Header
from kclient.sender.bulk import SendBatchResult
from kclient.sender.future import FutureRecordMetadata, RecordMetadata
from kclient.sender.offsets import group_metadata_of, offsets_of
from kclient.sender.txn_state import TransactionalRequestResult

__all__ = ["AIOKafkaProducer"]


def _queue(  # noqa: PLR0917 (send's arguments, positionally)
    producer: KafkaProducer,
    topic: str,
    value: Any,
    key: Any,
    partition: int | None,
    timestamp_ms: int | None,
    headers: Sequence[Header] | None,
    callback: Callable[[RecordMetadata | None, BaseException | None], None] | None,
    acks: RecordAcks | None = None,
) -> FutureRecordMetadata:
    """``producer.send``; with interceptors, past their ``on_send`` (``send`` ran it once;
    ``acks``: the record's ``on_send_record`` acknowledgements)."""
    if producer._interceptors is not None:
        return producer._send_intercepted(
            topic, value, key, headers, partition, timestamp_ms, callback, True, acks
        )
    return producer.send(
        topic,
        value,
        key,
        headers=headers,
        partition=partition,
        timestamp_ms=timestamp_ms,
        callback=callback,
    )


log = logging.getLogger(__name__)

_FIRST_WAIT_S = 0.001
_MAX_WAIT_S = 0.05


class AIOKafkaProducer:
    """``await start()``, ``await send(...)`` → a future of ``RecordMetadata``,
    ``await stop()``. Keywords: aiokafka's (``bootstrap_servers``, ``linger_ms``, ...)
    or any kclient setting under its Kafka name or in snake_case."""

    def __init__(self, **kwargs: Any) -> None:
        self._settings, self._max_block_ms = producer_settings(kwargs)
        self._kafka_client = self._settings.pop("kafka_client", None)  # tests
        self._producer: KafkaProducer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        self._threaded = ThreadCompletions(log)
        """``send``'s futures with the Sender on its own thread (a scripted client)."""
        self._pending: set[asyncio.Future[RecordMetadata]] = set()
        self._on_loop = False
        """Whether the Sender runs on the loop (``LoopProducer``), not on its own thread."""
        self._completions: BatchCompletions | None = None
        """The futures of ``send``, settled once per batch (the Sender on the loop)."""
        self._run_now: Callable[[], None] | None = None
        """The driver's ``run_now`` (the Sender on the loop)."""

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Create the producer and wait (up to ``request_timeout_ms``) for the cluster's
        metadata; raises ``KafkaConnectionError`` if no bootstrap server answers, at once
        (``BootstrapRefusedError``, after ``bootstrap_refused_timeout_ms``) when every one
        refuses connections. Names in ``bootstrap_servers`` that do not resolve:
        ``ConfigError`` here, or with ``bootstrap_resolve_timeout_ms`` above 0
        ``BootstrapResolutionError`` after that long."""
        if self._producer is not None or self._stopped:
            raise IllegalStateError("start() was already called on this producer")
        self._loop = asyncio.get_running_loop()
        settings = {**self._settings, "max.block.ms": 0}
        producer: KafkaProducer
        client = self._kafka_client
        if client is None or hasattr(client, "on_ready"):
            producer = LoopProducer(settings, self._loop, client)
            self._on_loop = True
            driver = producer.driver
            completions = self._completions = BatchCompletions(self._loop, driver.is_running)
            # the callbacks of the futures a step settled run right after it
            driver.pending = completions.pending
            driver.after_step = completions.after_step
            self._run_now = driver.run_now
        else:  # a client without on_ready (tests, benchmarks): the Sender on its own thread
            producer = KafkaProducer(settings, kafka_client=client)
        self._producer = producer
        producer._ack_send_errors = False  # a send that waits is tried again: see _send_later
        sasl = getattr(producer, "network_sasl", producer.config.sasl)
        if isinstance(sasl, OAuthBearerCredentials):  # the first token, awaited here
            try:
                await sasl.source.start()
            except BaseException:
                await self.stop()
                raise
        if isinstance(producer, LoopProducer):
            try:
                await producer.prime()  # ConfigError: no bootstrap name resolves
            except BaseException:
                await self.stop()
                raise
        metadata = producer._metadata
        metadata.request_update()
        self._wakeup(producer)
        config = producer.config  # a name still resolving may take its own time
        wait_ms = max(config.request_timeout_ms, config.bootstrap_resolve_timeout_ms)
        deadline = self._loop.time() + wait_ms / 1000
        wait_s = _FIRST_WAIT_S
        client = producer._client
        while metadata.fetch().is_bootstrap_configured:
            refused = (
                client.bootstrap_error(producer._clock.monotonic_ms())
                if isinstance(client, NetworkClient)
                else None
            )
            if refused is not None:  # no bootstrap name resolves, or each refuses: no wait
                await self.stop()
                raise refused
            if self._loop.time() >= deadline:
                await self.stop()
                raise KafkaConnectionError(
                    f"no bootstrap server of {','.join(producer.config.bootstrap_servers)} "
                    f"answered within 'request.timeout.ms' "
                    f"({producer.config.request_timeout_ms} ms)"
                )
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, _MAX_WAIT_S)
        if producer._txn is not None:
            try:
                result = producer._txn.initialize_transactions()
                await self._await_txn(result, "start")
            except BaseException:
                await self.stop()
                raise

    async def stop(self) -> None:
        """Abort a transaction left open, deliver what was sent (or fail it at
        ``delivery.timeout.ms``), then close. Calling it again does nothing."""
        producer = self._producer
        if producer is None or self._stopped:
            self._stopped = True
            return
        self._stopped = True
        try:
            await self._abort_open_transaction(producer)
            await self.flush()
        finally:
            if isinstance(producer, LoopProducer):
                await producer.aclose(5.0)
            else:
                producer.close(timeout=5.0)
            self._threaded.deliver()

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

    def send(  # noqa: PLR0917 -- aiokafka's signature
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> Awaitable[Future]:
        """Queue a record; ``await`` it for a future of its ``RecordMetadata``. Awaits
        (without blocking the loop) topic metadata and ``buffer.memory`` up to
        ``max_block_ms``. The common case queues the record at the call and returns an
        awaitable that is already done (no coroutine); the rest is a coroutine."""
        producer = self._producer
        completions = self._completions
        if producer is not None and producer._interceptors is not None:
            return self._send_intercepted(
                producer, topic, value, key, partition, timestamp_ms, headers
            )
        if completions is None or producer is None or self._stopped:
            return self._send_threaded(topic, value, key, partition, timestamp_ms, headers)
        try:  # the Sender on the loop: settled once per batch
            record = producer.send(
                topic,
                value,
                key,
                headers=headers,
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
        except KafkaTimeoutError as exc:
            return self._send_later(exc, topic, value, key, partition, timestamp_ms, headers)
        return completions.track(record)  # type: ignore[no-any-return]

    def _send_intercepted(  # noqa: PLR0917
        self,
        producer: KafkaProducer,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
    ) -> Awaitable[Future]:
        """``send`` with interceptors: their ``on_send`` once, here; every try after it
        queues the record it returned (``_queue``)."""
        assert producer._interceptors is not None
        intercepted, acks = producer._interceptors.on_send_record(
            ProducerRecord(topic, value, key, headers, partition, timestamp_ms)
        )
        topic, value, key, headers, partition, timestamp_ms = intercepted
        completions = self._completions
        if completions is None or self._stopped:
            return self._send_threaded(topic, value, key, partition, timestamp_ms, headers, acks)
        try:
            record = producer._send_intercepted(
                topic, value, key, headers, partition, timestamp_ms, None, True, acks
            )
        except KafkaTimeoutError as exc:
            return self._send_later(exc, topic, value, key, partition, timestamp_ms, headers, acks)
        return completions.track(record)  # type: ignore[no-any-return]

    async def _send_later(  # noqa: PLR0917
        self,
        error: KafkaTimeoutError,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
        acks: RecordAcks | None = None,
    ) -> Future:
        """``send`` once metadata or buffer memory is there (see ``_send_when_possible``)."""
        record = await self._send_when_possible(
            error, topic, value, key, partition, timestamp_ms, headers, None, acks
        )
        completions = self._completions
        assert completions is not None
        return await completions.track(record)  # type: ignore[no-any-return]

    async def _send_threaded(  # noqa: PLR0917
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
        acks: RecordAcks | None = None,
    ) -> Future:
        """``send`` with the Sender on its own thread (or before start / after stop: the
        error is raised at the ``await``; a record that began its ``on_send_record``
        acknowledgements is acknowledged with it)."""
        try:
            producer = self._started()
        except IllegalStateError as exc:
            stopped = self._producer
            if acks is not None and stopped is not None and stopped._interceptors is not None:
                stopped._interceptors.on_send_error(topic, partition, exc, acks)
            raise
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        callback = self._threaded.callback(loop, future)
        try:
            _queue(producer, topic, value, key, partition, timestamp_ms, headers, callback, acks)
        except KafkaTimeoutError as exc:
            await self._send_when_possible(
                exc, topic, value, key, partition, timestamp_ms, headers, callback, acks
            )
        self._pending.add(future)  # flush() waits for these (on the loop: the accumulator)
        future.add_done_callback(self._pending.discard)
        return future

    async def _send_when_possible(  # noqa: PLR0917
        self,
        error: KafkaTimeoutError,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
        callback: Callable[[RecordMetadata | None, BaseException | None], None] | None,
        acks: RecordAcks | None = None,
    ) -> FutureRecordMetadata:
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
                self._wakeup(producer)
            remaining_s = deadline - loop.time()
            if remaining_s <= 0:
                if not isinstance(error, BufferExhaustedError) and topic not in producer._queues:
                    producer._metadata.forget(topic)  # no refreshes, no warnings for it
                final = self._blocked_too_long(error, topic, partition)
                if producer._interceptors is not None:  # the record's one acknowledgement
                    producer._interceptors.on_send_error(topic, partition, final, acks)
                raise final from error
            await asyncio.sleep(min(wait_s, remaining_s))
            wait_s = min(wait_s * 2, _MAX_WAIT_S)
            try:
                return _queue(
                    self._started(),
                    topic,
                    value,
                    key,
                    partition,
                    timestamp_ms,
                    headers,
                    callback,
                    acks,
                )
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
        detail = ""
        if partition is not None:
            what = f"partition {partition} of {what}"
            producer = self._producer
            count = (
                None
                if producer is None
                else producer._metadata.fetch().partition_count_for_topic(topic)
            )
            if count:
                detail = f" (the topic's partition count is {count})"
        return KafkaTimeoutError(
            f"{what} not present in metadata after {ms} ms ('max_block_ms'){detail}"
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
        run_now = self._run_now
        if run_now is not None:  # the Sender on the loop
            run_now()  # the record goes out now, not after a loop iteration
        return await future

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self._started().config.batch_size)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a batch's records to one partition, in order, through the producer's bulk
        path (``KafkaProducer.send_batch``); the future gives the first record's metadata
        once all are acknowledged, or raises ``SendBatchError`` naming the failed rows.
        Awaits the partition's metadata and ``buffer.memory`` up to ``max_block_ms``; if
        the buffer stays full after some rows went, the rest fail with that error."""
        self._started()
        batch.close()
        rows = batch.record_count()
        if not rows:
            raise ValueError("send_batch() of an empty batch")
        await self._await_metadata(topic, partition)
        timestamps, values = batch.timestamps, batch.values
        keys = batch.keys if batch.has_keys else None
        headers = batch.headers if batch.has_headers else None
        loop = self._loop
        assert loop is not None
        parts: list[tuple[int, SendBatchResult]] = []
        deadline = loop.time() + self._max_block_ms / 1000
        wait_s = _FIRST_WAIT_S
        start = 0
        while True:
            part = self._started().send_batch(
                topic,
                values[start:] if start else values,
                None if keys is None else keys[start:],
                None if headers is None else headers[start:],
                [partition] * (rows - start),
                timestamps[start:] if start else timestamps,
                serialize=False,  # a BatchBuilder holds bytes, as aiokafka's
            )
            full = [row for row, e in part._errors.items() if isinstance(e, BufferExhaustedError)]
            if not full:
                parts.append((start, part))
                break
            first_full = min(full)
            if loop.time() >= deadline:
                full_error = part._errors[first_full]
                assert isinstance(full_error, BufferExhaustedError)
                error = self._blocked_too_long(full_error, topic, partition)
                if start == 0 and first_full == 0:
                    raise error
                part._errors.update({row: error for row in full})
                parts.append((start, part))
                break
            for row in full:  # these go again, once the buffer has room
                del part._errors[row]
            if first_full:
                parts.append((start, part))
                start += first_full
            await asyncio.sleep(min(wait_s, max(deadline - loop.time(), 0)))
            wait_s = min(wait_s * 2, _MAX_WAIT_S)
        if self._on_loop and self._started().driver.scheduled:  # type: ignore[attr-defined]
            await asyncio.sleep(0)  # let the Sender send it while the caller builds the next
        call_soon = loop.call_soon if self._on_loop else loop.call_soon_threadsafe
        delivery = BatchDelivery(loop, topic, parts, call_soon)
        self._pending.add(delivery.future)
        delivery.future.add_done_callback(self._pending.discard)
        return delivery.future

    async def flush(self) -> None:
        """Send everything queued now and wait until each record sent before this call
        is acknowledged or failed."""
        producer = self._started() if not self._stopped else self._producer
        if producer is None:
            return
        waiting = list(self._pending)
        accumulator = producer._accumulator
        up_to = accumulator.begin_flush()
        try:
            self._wakeup(producer)
            if isinstance(producer, LoopProducer):
                await producer.await_flush(up_to)
            if waiting:
                await asyncio.wait(waiting)
        finally:
            accumulator.end_flush()

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids, awaiting its metadata up to ``max_block_ms``."""
        return set(range(await self._await_metadata(topic, None)))

    async def _await_metadata(self, topic: str, partition: int | None) -> int:
        """The topic's partition count once its metadata (with ``partition``, if given) is
        known; awaited up to ``max_block_ms``, then ``KafkaTimeoutError``."""
        loop = self._loop
        assert loop is not None
        deadline = loop.time() + self._max_block_ms / 1000
        wait_s = _FIRST_WAIT_S
        while True:
            producer = self._started()
            try:
                count = len(producer.partitions_for(topic))
                if partition is None or partition < count:
                    return count
                error = KafkaTimeoutError(f"the topic has {count} partitions")
            except KafkaTimeoutError as exc:
                error = exc
            producer._metadata.request_update_for_topic(topic)
            self._wakeup(producer)
            if loop.time() >= deadline:
                final = self._blocked_too_long(error, topic, partition)
                if producer._interceptors is not None:  # the record's one acknowledgement
                    producer._interceptors.on_send_error(topic, partition, final)
                raise final from error
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, _MAX_WAIT_S)

    # ---- transactions --------------------------------------------------------------------

    async def begin_transaction(self) -> None:
        """Open a transaction (``transactional_id`` must be set): records sent until
        ``commit_transaction`` are written atomically."""
        self._started()._transactional("begin_transaction").begin_transaction()

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it (awaited, up to
        ``max_block_ms``). ``TransactionRequiresAbortError``: the transaction failed, abort
        it and go on; ``ProducerFencedError`` and other fatal errors: the producer is
        finished; ``KafkaTimeoutError``: call it again to keep waiting."""
        txn = self._started()._transactional("commit_transaction")
        await self._await_txn(txn.begin_commit(), "commit_transaction")

    async def abort_transaction(self) -> None:
        """Abort the transaction: records still queued fail with
        ``TransactionAbortedError``; none of it becomes visible to read_committed readers."""
        txn = self._started()._transactional("abort_transaction")
        await self._await_txn(txn.begin_abort(), "abort_transaction")

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: str) -> None:
        """Commit the consumer group ``group_id``'s ``offsets`` (``{TopicPartition: next
        offset}``) with the open transaction: they take effect only if it commits."""
        producer = self._started()
        group = group_metadata_of(group_id)
        by_partition = offsets_of(aiokafka_offsets(offsets))
        txn = producer._transactional("send_offsets_to_transaction")
        if by_partition:
            result = txn.send_offsets_to_transaction(by_partition, group)
            await self._await_txn(result, "send_offsets_to_transaction")

    def transaction(self) -> TransactionContext:
        """``async with producer.transaction():`` — begin, then commit (or abort if the
        block raised)."""
        return TransactionContext(self)

    async def _await_txn(self, result: TransactionalRequestResult, operation: str) -> None:
        producer = self._started() if not self._stopped else self._producer
        assert producer is not None
        txn = producer._txn
        await await_result(
            result,
            self._max_block_ms,
            operation,
            lambda: self._wakeup(producer),
            lambda: None if txn is None else txn.last_problem,
        )

    async def _abort_open_transaction(self, producer: KafkaProducer) -> None:
        txn = producer._txn
        if txn is None or not txn.has_ongoing_transaction or txn.fatal_error is not None:
            return
        log.info("aborting the open transaction: the producer is stopping")
        try:
            await self._await_txn(txn.begin_abort(), "abort_transaction")
        except KafkaError as exc:
            log.warning("could not abort the open transaction on stop(): %s", exc)

    def _transaction_fatal(self) -> bool:
        producer = self._producer
        txn = None if producer is None else producer._txn
        return txn is not None and txn.fatal_error is not None

    # ---- completions (on the loop, or from the Sender thread) -----------------------------

    @staticmethod
    def _wakeup(producer: KafkaProducer) -> None:
        if isinstance(producer, LoopProducer):
            producer.wakeup()
        else:
            producer._sender.wakeup()

    def metrics(self) -> dict[str, float]:
        return self._started().metrics()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("started" if self._producer else "new")
        return f"<kclient.aio.AIOKafkaProducer {state}>"
