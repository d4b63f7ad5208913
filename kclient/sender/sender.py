"""Sender: Java's ``Sender`` — the producer's one I/O thread.

``run_once()`` is one step of the loop, as in Java's ``Sender.runOnce``:
``accumulator.ready`` → metadata for unknown leaders → drop nodes ``client.ready`` refuses
(this starts connections) → ``accumulator.drain`` → **one ProduceRequest per node** →
fail batches past ``delivery.timeout.ms`` → ``client.poll``. Responses come back through
request callbacks inside ``poll``: each partition's batch is completed, retried (with
exponential backoff), split (MESSAGE_TOO_LARGE) or failed (``produce_responses.py``).
Threads blocked on a completed batch's futures are woken by the next ``client.poll`` just
before it blocks (``release_before_blocking``): woken earlier, they would find the GIL
still held and need a second wake-up.

Everything here runs on the Sender thread; other threads only call ``wakeup``,
``initiate_close`` and ``force_close``.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterable

from kclient.clock import Clock
from kclient.errors import (
    FatalTransactionError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
)
from kclient.network.cluster import Cluster, TopicPartition
from kclient.network.kafka_client import ClientRequest, KafkaClient, new_client_request
from kclient.network.selector import release_all
from kclient.protocol import ApiKey
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.batch import ProducerBatch
from kclient.sender.idempotence import TransactionManager
from kclient.sender.metrics import SenderMetrics
from kclient.sender.produce_request import produce_topic_data
from kclient.sender.produce_responses import ProduceResponses
from kclient.sender.telemetry import TelemetrySender
from kclient.sender.transaction_manager import TransactionManager as TransactionalManager
from kclient.sender.txn_sender import TransactionalRequestSender

log = logging.getLogger(__name__)

PRODUCE_MIN_VERSION = 3  # record batch v2
PRODUCE_MAX_VERSION = 13
#: v13 names topics by id (KIP-516): a request uses it only when the metadata gave every
#: topic in it an id; otherwise the topics go by name, at most v12
PRODUCE_MAX_VERSION_BY_NAME = 12
#: a transaction of transaction version 1 must not use Produce v12+ (KIP-890: v12 adds
#: the partition to the transaction implicitly)
PRODUCE_MAX_VERSION_TV1 = 11
TOPIC_REFRESH_INTERVAL_MS = 1_000
_NO_TIMEOUT_MS = 2**63 - 1
_NO_IDS: dict[str, uuid.UUID] = {}


class Sender(ProduceResponses):
    """Drains the accumulator into ProduceRequests and completes batches from responses
    (``ProduceResponses``, ``produce_responses.py``)."""

    def __init__(
        self,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        *,
        clock: Clock,
        acks: int,
        max_request_size: int,
        request_timeout_ms: int,
        retries: int,
        retry_backoff_ms: int,
        guarantee_message_order: bool,
        transaction_manager: TransactionManager | None = None,
        metrics: SenderMetrics | None = None,
        telemetry: TelemetrySender | None = None,
        log_prefix: str = "",
    ) -> None:
        self._client = client
        self._metadata = client.metadata
        self._accumulator = accumulator
        self._clock = clock
        self._acks = acks
        self._max_request_size = max_request_size
        self._request_timeout_ms = request_timeout_ms
        self._retries = retries
        self._retry_backoff_ms = retry_backoff_ms
        self._guarantee_order = guarantee_message_order
        self._tm = transaction_manager
        self._txn = (
            TransactionalRequestSender(
                transaction_manager,
                client,
                accumulator,
                self.abort_undrained,
                request_timeout_ms=request_timeout_ms,
                monotonic_ms=clock.monotonic_ms,
                log_prefix=log_prefix,
            )
            if isinstance(transaction_manager, TransactionalManager)
            else None
        )
        self._transactional_id = (
            transaction_manager.transactional_id if transaction_manager is not None else None
        )
        self.metrics = metrics if metrics is not None else SenderMetrics(clock.monotonic_ms)
        self.telemetry = telemetry
        """KIP-714's metrics push (``enable.metrics.push``), or None."""
        self._prefix = log_prefix
        self._in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        self._wakeups: list[threading.Lock] = client.release_before_blocking
        """Locks that wake threads waiting on batches completed by the last poll: the
        client's own list, released by its next poll just before it blocks, so a woken
        caller finds the GIL free instead of waking once for the lock and again for it."""
        self._next_expiry_check_ms = _NO_TIMEOUT_MS
        """No in-flight batch reaches delivery.timeout.ms before this (a lower bound)."""
        self._last_cluster: Cluster | None = None
        self._last_topic_refresh_ms = -TOPIC_REFRESH_INTERVAL_MS
        self.running = True
        self.force_close_requested = False
        self.on_failure: Callable[[KafkaError], None] | None = None
        """Told when ``run`` (or a loop driving ``run_once``) fails, before the network
        client closes: the producer keeps the error for its callers."""

    # ---- thread entry, close ---------------------------------------------------------

    def run(self) -> None:
        """The thread body: loop until closed, finish what is queued, then clean up."""
        log.debug("%sstarting the sender thread", self._prefix)
        try:
            while self.running:
                self.run_once()
            self._finish_on_close()
            if self.telemetry is not None:
                self._push_terminating()
            if self._txn is not None:
                self._txn.abort_on_close(lambda: self.force_close_requested, self.run_once)
            if self.force_close_requested:
                self.abort_incomplete_batches(
                    IllegalStateError("the producer was closed before these records were delivered")
                )
        except Exception as exc:  # logged, and kept by the producer for its callers
            self.fail_on_error(exc)
        except BaseException as exc:
            self.fail_on_error(exc)
            raise
        finally:
            self.release_on_close()

    def _finish_on_close(self) -> None:
        """Closing: deliver what was sent (each record fails at ``delivery.timeout.ms`` at
        the latest) and send the transaction's pending requests, giving these at most
        ``request.timeout.ms`` once no record is left (a request retried for ever, say for
        a coordinator that never loads, must not keep the producer from closing)."""
        deadline_ms = self._clock.monotonic_ms() + self._request_timeout_ms
        while not self.force_close_requested and self.has_pending_work():
            if (
                self._txn is not None
                and self._clock.monotonic_ms() >= deadline_ms
                and not self._has_pending_records()
            ):
                log.warning(
                    "%sclosing: the transaction's requests did not complete within "
                    "'request.timeout.ms' (%d ms; last: %s)",
                    self._prefix,
                    self._request_timeout_ms,
                    self._txn.tm.last_problem or "no answer",
                )
                return
            self.run_once()

    def _push_terminating(self) -> None:
        """Closing: the last metrics push, ``terminating`` set (KIP-714), for at most
        ``request.timeout.ms`` (and no longer than ``close``'s timeout, which forces)."""
        deadline_ms = self._clock.monotonic_ms() + self._request_timeout_ms
        self.begin_terminating_push()
        while (
            not self.force_close_requested
            and self.terminating_push_pending()
            and self._clock.monotonic_ms() < deadline_ms
        ):
            self.run_once()

    def begin_terminating_push(self) -> None:
        """Closing, records delivered: the next loops send the last metrics push (KIP-714;
        ``kclient.aio``'s close drives them)."""
        if self.telemetry is not None:
            self.telemetry.reporter.initiate_close(self._clock.monotonic_ms())

    def terminating_push_pending(self) -> bool:
        """Whether the last metrics push is still to be sent or answered."""
        return self.telemetry is not None and not self.telemetry.reporter.stopped

    def _has_pending_records(self) -> bool:
        return (
            self._accumulator.has_undrained()
            or self._client.has_in_flight_requests()
            or any(self._in_flight_batches.values())
        )

    def fail_on_error(self, exc: BaseException) -> None:
        """``run`` (or an event loop driving ``run_once``) failed: fail every pending record."""
        log.exception("%sthe sender thread failed; failing every pending record", self._prefix)
        error = FatalTransactionError(
            f"the producer's sender thread failed: {exc!r}; this producer cannot send any "
            "more: close it (and report the error, it is a bug)"
        )
        error.__cause__ = exc
        if self.on_failure is not None:
            self.on_failure(error)
        self.abort_incomplete_batches(error)

    def release_on_close(self) -> None:
        """The last step of closing: fail what is left, close the network client."""
        self._release_waiters()
        self.abort_incomplete_batches(
            IllegalStateError("the producer was closed before these records were delivered")
        )
        self._client.close()
        log.debug("%sthe sender thread stopped", self._prefix)

    def has_pending_work(self) -> bool:
        return self._has_pending_records() or (
            self._txn is not None and self._txn.has_pending_work()
        )

    def initiate_close(self) -> None:
        """Stop taking records; the thread finishes what was sent before (any thread)."""
        self._accumulator.closed = True
        self.running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now; whatever is not delivered fails (any thread)."""
        self.force_close_requested = True
        self.initiate_close()

    def wakeup(self) -> None:
        self._client.wakeup()

    # ---- one step ----------------------------------------------------------------------

    def run_once(self) -> int:
        """One iteration of the loop; the clock is read once, here. Returns the timeout
        it polled with (ms): when the next iteration is due if no I/O comes first (an
        event loop driving the Sender schedules it then)."""
        now_ms = self._clock.monotonic_ms()
        tm = self._tm
        if tm is not None:
            if tm.fatal_error is not None:
                self.abort_undrained(tm.fatal_error)
                self._release_waiters()
                self._client.poll(self._retry_backoff_ms, now_ms)
                return self._retry_backoff_ms
            if self._txn is not None:
                txn_timeout_ms = self._txn.run_once(now_ms)
            elif not tm.has_producer_id:
                self._maybe_init_producer_id(now_ms)
        poll_timeout_ms = self._send_producer_data(now_ms)
        telemetry = self.telemetry
        if telemetry is not None:  # once per loop, off the per-record path
            poll_timeout_ms = min(poll_timeout_ms, telemetry.maybe_update(now_ms))
        if self._txn is not None:
            poll_timeout_ms = min(poll_timeout_ms, txn_timeout_ms)
        elif tm is not None and not tm.has_producer_id:
            poll_timeout_ms = min(poll_timeout_ms, tm.producer_id_poll_delay_ms(now_ms))
        self._client.poll(poll_timeout_ms, now_ms)
        return poll_timeout_ms

    def poll_network(self) -> int:
        """Only the network's part of ``run_once``: what a ready socket brings is read (the
        answers complete their batches) or written, nothing is sent. For an event loop
        that runs this when a socket is ready; its next ``run_once`` is due at once
        (returns 0)."""
        self._client.poll_ready(self._clock.monotonic_ms())
        return 0

    def _release_waiters(self) -> None:
        release_all(self._wakeups)

    def _send_producer_data(self, now_ms: int) -> int:
        metadata = self._metadata
        cluster = metadata.fetch()
        accumulator = self._accumulator
        if cluster is not self._last_cluster:
            accumulator.update_cluster(cluster)
            self._last_cluster = cluster
        if now_ms - self._last_topic_refresh_ms >= TOPIC_REFRESH_INTERVAL_MS:
            since_ms, self._last_topic_refresh_ms = self._last_topic_refresh_ms, now_ms
            for topic in accumulator.topics_in_use(since_ms):
                metadata.add(topic, now_ms)  # keeps it from expiring (metadata.max.idle.ms)
        if not accumulator.has_undrained():  # idle: only in-flight batches can expire
            if now_ms >= self._next_expiry_check_ms:
                self._expire_batches(now_ms)
            return max(min(accumulator.delivery_timeout_ms, self._next_expiry_check_ms - now_ms), 0)
        result = accumulator.ready(cluster, now_ms)
        if result.unknown_leader_topics:
            self._unknown_leaders(result.unknown_leader_topics, now_ms)
        not_ready_timeout_ms = _NO_TIMEOUT_MS
        ready_nodes = []
        client = self._client
        for node in result.ready_nodes:
            if client.ready(node, now_ms):
                ready_nodes.append(node)
            else:
                not_ready_timeout_ms = min(not_ready_timeout_ms, client.poll_delay_ms(node, now_ms))
        batches = {}
        if ready_nodes:
            batches = accumulator.drain(cluster, ready_nodes, self._max_request_size, now_ms)
            # Requests first (on the wire at once; their answers are read by a later poll),
            # then the bookkeeping. As in Java, batches that expire meanwhile are still
            # sent; their answers are ignored.
            for node_id, node_batches in batches.items():
                self._send_produce_request(node_id, node_batches, now_ms)
            in_flight = self._in_flight_batches
            expiry_ms = self._next_expiry_check_ms
            delivery_timeout_ms = accumulator.delivery_timeout_ms
            for node_batches in batches.values():
                for batch in node_batches:
                    tp = batch.tp
                    tp_batches = in_flight.get(tp)
                    if tp_batches is None:
                        in_flight[tp] = [batch]
                    else:
                        tp_batches.append(batch)
                    expiry_ms = min(expiry_ms, batch.created_ms + delivery_timeout_ms)
                    if self._guarantee_order:
                        accumulator.mute(tp)
            self._next_expiry_check_ms = expiry_ms
        self._expire_batches(now_ms)
        poll_timeout_ms = min(
            result.next_ready_check_delay_ms,
            not_ready_timeout_ms,
            self._next_expiry_check_ms - now_ms,
        )
        if batches and accumulator.more_ready:
            poll_timeout_ms = 0  # more to drain once these are written
        return max(poll_timeout_ms, 0)

    def _unknown_leaders(self, topics: Iterable[str], now_ms: int) -> None:
        """``ready`` found partitions of ``topics`` without a known leader: refresh."""
        metadata = self._metadata
        for topic in topics:
            metadata.add(topic, now_ms)
        log.debug("%sno leader known for %s; refreshing metadata", self._prefix, topics)
        metadata.request_update()

    # ---- delivery timeout ----------------------------------------------------------------

    def _expire_batches(self, now_ms: int) -> None:
        delivery_timeout_ms = self._accumulator.delivery_timeout_ms
        expired: list[ProducerBatch] = []
        if now_ms >= self._next_expiry_check_ms:  # else no in-flight batch can have expired
            soonest_ms = _NO_TIMEOUT_MS
            for batches in self._in_flight_batches.values():
                for batch in list(batches):
                    expires_ms = batch.created_ms + delivery_timeout_ms
                    if now_ms >= expires_ms:
                        batches.remove(batch)
                        expired.append(batch)
                    elif expires_ms < soonest_ms:
                        soonest_ms = expires_ms
            self._next_expiry_check_ms = soonest_ms
        expired.extend(self._accumulator.expired_batches(now_ms))
        for batch in expired:
            waited_ms = now_ms - batch.created_ms
            self._fail_batch(
                batch,
                KafkaTimeoutError(
                    f"expiring {batch.record_count} record(s) for {batch.tp}: {waited_ms} ms has "
                    "passed since the batch was created "
                    f"('delivery.timeout.ms' is {delivery_timeout_ms} ms)"
                ),
                now_ms,
            )

    # ---- produce requests --------------------------------------------------------------------

    def _send_produce_request(
        self, node_id: int, batches: list[ProducerBatch], now_ms: int
    ) -> None:
        """All of a node's drained batches in one ProduceRequest (Java's ``sendProduceRequest``)."""
        metrics = self.metrics
        cluster = self._last_cluster  # the one this step drained by
        topic_data, by_tp, names, size, records = produce_topic_data(
            batches, cluster.topic_ids if cluster is not None else _NO_IDS
        )
        body = {
            "transactional_id": self._transactional_id,
            "acks": self._acks,
            "timeout_ms": self._request_timeout_ms,
            "topic_data": topic_data,
        }
        request = new_client_request(  # every field, positionally: see ClientRequest's
            node_id,
            ApiKey.PRODUCE,
            body,
            now_ms,
            self._acks != 0,  # expect_response
            functools.partial(self._handle_produce_response, by_tp, names),  # callback
            self._request_timeout_ms,
            PRODUCE_MIN_VERSION,
            self._produce_max_version(names is not None),
        )
        self._client.send(request, now_ms)
        # Metrics once the request is on its way (off the latency path).
        for batch in batches:
            metrics.record_batch(batch.estimated_size_bytes, batch.uncompressed_bytes, now_ms)
            metrics.record_queue_time(now_ms - batch.created_ms, now_ms)
        metrics.record_request(len(batches), records, size, now_ms)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%sproduce request to node %d: %d batches, %d bytes",
                self._prefix,
                node_id,
                len(batches),
                size,
            )

    def _produce_max_version(self, by_id: bool) -> int:
        """The highest Produce version for a request: v13 only when ``by_id`` (every topic
        of the request has an id), v11 in a transaction of transaction version 1."""
        txn = self._txn
        if txn is not None and not txn.tm.is_transaction_v2:
            return PRODUCE_MAX_VERSION_TV1
        return PRODUCE_MAX_VERSION if by_id else PRODUCE_MAX_VERSION_BY_NAME

    # ---- InitProducerId ----------------------------------------------------------------------

    def _maybe_init_producer_id(self, now_ms: int) -> None:
        tm = self._tm
        assert tm is not None
        if not tm.should_request_producer_id(now_ms):
            return
        node = self._client.least_loaded_node(now_ms)
        if node is None or not self._client.ready(node, now_ms):
            return
        log.debug("%srequesting a producer id from node %d", self._prefix, node.id)
        body = tm.init_producer_id_request(now_ms)
        handler = functools.partial(tm.handle_init_producer_id_response, self._retry_backoff_ms)
        request = ClientRequest(node.id, ApiKey.INIT_PRODUCER_ID, body, now_ms, callback=handler)
        self._client.send(request, now_ms)

    # ---- abort ------------------------------------------------------------------------------

    def abort_undrained(self, error: BaseException) -> None:
        """Fail every queued batch (a fatal producer error)."""
        now_ms = self._clock.monotonic_ms()
        for batch in self._accumulator.abort_undrained():
            self._fail_batch(batch, error, now_ms)

    def abort_incomplete_batches(self, error: BaseException) -> None:
        """Fail everything not delivered: queued, in flight, or anywhere else (close)."""
        self._accumulator.closed = True
        self.abort_undrained(error)
        now_ms = self._clock.monotonic_ms()
        for batch in self._accumulator.incomplete_batches():
            if not batch.is_done:
                self._fail_batch(batch, error, now_ms)
            else:
                self._accumulator.deallocate(batch)
