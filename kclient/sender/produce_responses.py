"""The answer side of the ``Sender`` (``kclient/sender/sender.py``): Java's
``Sender.handleProduceResponse``, ``completeBatch``, ``canRetry`` and ``failBatch``.

``ProduceResponses`` is a base class of ``Sender``. Each partition of a ProduceResponse
(or of a request that was disconnected, timed out or refused for its version) completes
its batch: success (DUPLICATE_SEQUENCE_NUMBER too, under idempotence), a retry after
backoff when the error is retriable and ``retries`` and ``delivery.timeout.ms`` allow, a
split on MESSAGE_TOO_LARGE, or failure with the broker's error naming the partition (and
per-record errors). Runs on the Sender thread, inside ``client.poll``'s callbacks.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kclient import errors
from kclient.errors import KafkaError, RecordTooLargeError
from kclient.network.cluster import Node, TopicPartition
from kclient.network.kafka_client import ClientResponse
from kclient.sender.batch import ProducerBatch

if TYPE_CHECKING:
    from kclient.network.metadata import Metadata
    from kclient.sender.accumulator import RecordAccumulator
    from kclient.sender.idempotence import TransactionManager
    from kclient.sender.metrics import SenderMetrics

log = logging.getLogger("kclient.sender.sender")

_MESSAGE_TOO_LARGE = errors.MessageTooLargeError.code
_DUPLICATE_SEQUENCE = errors.DuplicateSequenceNumberError.code
_WRITTEN: Mapping[str, Any] = {}
"""The partition answer of an acks=0 request: none (offset and log-append time -1)."""
_OUT_OF_ORDER_SEQUENCE = errors.OutOfOrderSequenceNumberError.code
_UNKNOWN_PRODUCER_ID = errors.UnknownProducerIdError.code
_LEADER_MOVED = (errors.NotLeaderOrFollowerError.code, errors.FencedLeaderEpochError.code)
"""The errors whose partition answer may name the new leader (KIP-951)."""


class ProduceResponses:
    """Completing, retrying, splitting or failing batches from Produce answers."""

    # set by Sender.__init__
    _accumulator: RecordAccumulator
    _metadata: Metadata
    _tm: TransactionManager | None
    _guarantee_order: bool
    _retries: int
    _prefix: str
    _in_flight_batches: dict[TopicPartition, list[ProducerBatch]]
    _wakeups: list[threading.Lock]
    metrics: SenderMetrics

    def _handle_produce_response(
        self,
        batches: dict[TopicPartition, ProducerBatch],
        names: Mapping[uuid.UUID, str] | None,
        response: ClientResponse,
    ) -> None:
        """``names``: the request's topics by id, when it named them by id (v13 answers name
        topics by id only); None when it named them by name."""
        now_ms = response.received_time_ms
        if response.version_mismatch is not None:
            for batch in batches.values():
                self._fail_batch(batch, response.version_mismatch, now_ms)
            return
        if response.disconnected:
            cls = (
                errors.RequestTimedOutError if response.timed_out else errors.NetworkExceptionError
            )
            reason = f"{response.error}" if response.error is not None else "disconnected"
            for tp, batch in batches.items():
                self._complete_batch(
                    batch,
                    cls.code,
                    {"error_message": f"{tp} on node {response.destination}: {reason}"},
                    now_ms,
                )
            return
        self.metrics.record_latency(response.request_latency_ms, now_ms)
        body = response.body
        if body is None:  # acks=0: done once written (and its partition unmuted)
            for batch in batches.values():
                self._complete_batch(batch, 0, _WRITTEN, now_ms)
            return
        hinted: list[tuple[ProducerBatch, int, Mapping[str, Any]]] | None = None
        for topic in body.get("responses") or ():
            name = topic.get("name")
            if names is not None:  # as Java: by the id when it is one of the request's
                topic_id = topic.get("topic_id")
                if topic_id is not None:
                    name = names.get(topic_id, name)
            for part in topic.get("partition_responses") or ():
                # a plain tuple finds the TopicPartition key (a NamedTuple) and is cheaper
                found = batches.pop((name, part["index"]), None)  # type: ignore[call-overload]
                if found is None:
                    self._not_in_request(
                        name if name is not None else topic.get("topic_id"), part["index"]
                    )
                    continue
                code = part.get("error_code", 0)
                if code in _LEADER_MOVED and part.get("current_leader"):
                    if hinted is None:
                        hinted = []
                    hinted.append((found, code, part))  # after the others: see below
                    continue
                self._complete_batch(found, code, part, now_ms)
        if hinted is not None:
            self._follow_leader_hints(hinted, body, response.destination, now_ms)
        if batches:
            self._not_answered(batches, response, now_ms)

    def _follow_leader_hints(
        self,
        hinted: list[tuple[ProducerBatch, int, Mapping[str, Any]]],
        body: Mapping[str, Any],
        destination: int,
        now_ms: int,
    ) -> None:
        """KIP-951: the partitions the node no longer leads, each with the leader and epoch
        it named (and the answer's ``node_endpoints``), move in the metadata at once; their
        batches are retried there without the retry backoff and without a metadata
        refresh. A hint that is stale, names the node itself or an unknown node is not
        followed: that batch is retried as before (backoff, refresh)."""
        leaders: dict[TopicPartition, tuple[int, int]] = {}
        for batch, _, part in hinted:
            hint = part["current_leader"]
            leader_id = hint.get("leader_id", -1)
            epoch = hint.get("leader_epoch", -1)
            if leader_id >= 0 and epoch >= 0 and leader_id != destination:
                leaders[batch.tp] = (leader_id, epoch)
        endpoints = [
            Node(e["node_id"], e["host"], e["port"], e.get("rack"))
            for e in body.get("node_endpoints") or ()
        ]
        followed = self._metadata.update_partition_leadership(leaders, endpoints)
        for batch, code, part in hinted:
            moved = batch.tp in followed
            if moved:
                self.metrics.leader_hints_followed += 1
            self._complete_batch(batch, code, part, now_ms, leader_moved=moved)

    def _not_in_request(self, topic: object, partition: object) -> None:
        log.warning(
            "%sproduce response for %s-%s, which was not in the request",
            self._prefix,
            topic,
            partition,
        )

    def _not_answered(
        self, batches: dict[TopicPartition, ProducerBatch], response: ClientResponse, now_ms: int
    ) -> None:
        """The batches of the request the answer did not mention fail as a network error."""
        for tp, batch in batches.items():
            message = f"{tp}: node {response.destination} did not answer for this partition"
            self._complete_batch(
                batch, errors.NetworkExceptionError.code, {"error_message": message}, now_ms
            )

    def _complete_batch(
        self,
        batch: ProducerBatch,
        code: int,
        part: Mapping[str, Any],
        now_ms: int,
        leader_moved: bool = False,
    ) -> None:
        """Complete, retry, split or fail ``batch`` by its partition's answer.
        ``leader_moved``: the answer named the partition's new leader and the metadata now
        has it, so a retry goes there at once and needs no metadata refresh."""
        tp = batch.tp
        if self._guarantee_order:
            self._accumulator.unmute(tp)
        if code == 0 or (code == _DUPLICATE_SEQUENCE and self._tm is not None):
            self._complete_success(
                batch, part.get("base_offset", -1), part.get("log_append_time_ms", -1), now_ms
            )
            return
        if batch.is_done:  # expired while in flight; the broker's answer changes nothing
            self._remove_in_flight(batch)
            return
        if code == _MESSAGE_TOO_LARGE and batch.record_count > 1:
            self._remove_in_flight(batch)
            children = self._accumulator.split_and_reenqueue(batch, now_ms)
            log.warning(
                "%sbatch of %d records (%d bytes) for %s too large for the broker; "
                "split into %d batches",
                self._prefix,
                batch.record_count,
                len(batch.records or b""),
                tp,
                len(children),
            )
            self._accumulator.deallocate(batch)
            self.metrics.batch_splits += 1
            return
        message = part.get("error_message") or ""
        text = (
            message if message.startswith(f"{tp}:") else f"{tp}: {message}" if message else str(tp)
        )
        error: KafkaError = errors.for_code(code)(text)  # (a broker may name the partition)
        if code == _MESSAGE_TOO_LARGE:
            error = RecordTooLargeError(
                f"the record for {tp} ({len(batch.records or b'')} bytes as a one-record batch)"
                " is larger than the broker accepts (its 'message.max.bytes' / the topic's "
                f"'max.message.bytes'){f': {message}' if message else ''}"
            )
        if self._can_retry(batch, code, error, now_ms):
            log.warning(
                "%sretrying a batch for %s (attempt %d, %s)",
                self._prefix,
                tp,
                batch.attempts + 1,
                type(error).__name__,
            )
            tm = self._tm
            if tm is not None and (
                code == _UNKNOWN_PRODUCER_ID
                or (code == _OUT_OF_ORDER_SEQUENCE and tm.should_resequence(batch))
            ):
                tm.on_rejected(batch, self._in_flight_batches.get(tp, ()))
            self._remove_in_flight(batch)
            self._accumulator.reenqueue(batch, now_ms, skip_backoff=leader_moved)
            self.metrics.record_retries_for(batch.record_count, now_ms)
        else:
            record_errors = self._record_errors(part, tp)
            self._fail_batch(batch, error, now_ms, record_errors)
        if leader_moved:
            log.info(
                "%s%s for %s; its new leader is node %s (from the answer)",
                self._prefix,
                type(error).__name__,
                tp,
                part["current_leader"].get("leader_id"),
            )
        elif error.invalid_metadata:
            log.warning("%s%s for %s; refreshing metadata", self._prefix, type(error).__name__, tp)
            self._metadata.request_update()

    def _can_retry(self, batch: ProducerBatch, code: int, error: KafkaError, now_ms: int) -> bool:
        if batch.has_reached_delivery_timeout(self._accumulator.delivery_timeout_ms, now_ms):
            return False
        if batch.attempts >= self._retries:
            return False
        if self._tm is not None and code in (_OUT_OF_ORDER_SEQUENCE, _UNKNOWN_PRODUCER_ID):
            return self._tm.can_retry_sequence_error(batch, code)
        return error.retriable

    @staticmethod
    def _record_errors(
        part: Mapping[str, Any], tp: TopicPartition
    ) -> dict[int, BaseException] | None:
        entries = part.get("record_errors") or ()
        if not entries:
            return None
        return {
            e["batch_index"]: errors.InvalidRecordError(
                f"{tp} record {e['batch_index']}: {e.get('batch_index_error_message') or ''}"
            )
            for e in entries
        }

    def _complete_success(
        self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int, now_ms: int
    ) -> None:
        self._remove_in_flight(batch)
        if self._tm is not None:
            self._tm.on_success(batch)
        if batch.final_state is None:
            self.metrics.record_sent(batch.builder.record_count, now_ms)
            batch.complete(base_offset, log_append_time_ms, self._wakeups)
        self._accumulator.deallocate(batch)

    def _fail_batch(
        self,
        batch: ProducerBatch,
        error: BaseException,
        now_ms: int,
        record_errors: dict[int, BaseException] | None = None,
    ) -> None:
        self._remove_in_flight(batch)
        if self._guarantee_order:
            self._accumulator.unmute(batch.tp)
        if self._tm is not None:
            self._tm.on_failure(batch, error)
        if not batch.is_done:
            batch.fail(error, record_errors)
            self.metrics.record_errors_for(batch.record_count, now_ms)
        self._accumulator.deallocate(batch)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        batches = self._in_flight_batches.get(batch.tp)
        if batches and batch in batches:
            batches.remove(batch)
