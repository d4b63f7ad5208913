"""Idempotent producer state: a non-transactional subset of Java's ``TransactionManager``.

Owned by the Sender thread (the producer only reads ``fatal_error``).

* The producer id and epoch come from ``InitProducerId``.
* Every partition has its own sequence numbers. A batch gets its base sequence when it is
  first drained and keeps it across retries, so the broker can drop duplicates
  (``DUPLICATE_SEQUENCE_NUMBER`` counts as success).
* Up to 5 requests may be in flight per connection. A batch being retried is only sent
  again once it is the oldest unresolved batch of its partition, so retries cannot
  reorder records.
* When a gap appears in a partition's sequence (a sent batch failed for good, or the
  broker rejected a batch with ``OUT_OF_ORDER_SEQUENCE_NUMBER`` / ``UNKNOWN_PRODUCER_ID``,
  i.e. did not write it), the partition stops taking new batches until every batch it has
  in flight is resolved; then the epoch is bumped (locally, as Java does for idempotent
  producers, KIP-360) and the partition restarts at sequence 0. Rejected batches were not
  written, so resending them under the new epoch neither duplicates nor reorders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import NamedTuple

from kclient import errors
from kclient.errors import KafkaError
from kclient.network.cluster import TopicPartition
from kclient.network.kafka_client import ClientResponse
from kclient.sender.batch import NO_SEQUENCE, ProducerBatch

log = logging.getLogger(__name__)

INT32_MAX = 2_147_483_647
EPOCH_MAX = 32_767


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


NO_PRODUCER_ID = ProducerIdAndEpoch(-1, -1)


def increment_sequence(sequence: int, increment: int) -> int:
    """Java's ``DefaultRecordBatch.incrementSequence``: wraps from int32 max to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass
class PartitionSequences:
    """Sequence bookkeeping of one partition (Java's ``TxnPartitionEntry``)."""

    producer_id_and_epoch: ProducerIdAndEpoch
    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[ProducerBatch] = field(default_factory=list)
    """Batches with a sequence that are not resolved yet, in sequence order."""
    needs_reset: bool = False

    def remove(self, batch: ProducerBatch) -> None:
        if batch in self.in_flight:
            self.in_flight.remove(batch)


class TransactionManager:
    """Producer id, epoch and per-partition sequence numbers of an idempotent producer.

    ``kclient.sender.transaction_manager.TransactionManager`` extends it for a producer
    with a ``transactional.id``; the hooks below are no-ops here.
    """

    is_transactional = False
    transactional_id: str | None = None

    def __init__(self, log_prefix: str = "") -> None:
        self.producer_id_and_epoch = NO_PRODUCER_ID
        self.fatal_error: KafkaError | None = None
        self.on_fatal_error: Callable[[KafkaError], object] = lambda error: None
        self.epoch_bumps = 0
        self._init_in_flight = False
        self._init_retry_at_ms = 0
        self._partitions: dict[TopicPartition, PartitionSequences] = {}
        self._prefix = log_prefix

    # ---- producer id -------------------------------------------------------------------

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id_and_epoch.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """A new producer id from InitProducerId: every partition starts again at 0."""
        self.producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
        log.info("%sproducer id %d, epoch %d", self._prefix, producer_id, epoch)

    # ---- InitProducerId (Java's InitProducerIdHandler; the Sender sends the request) -------

    def should_request_producer_id(self, now_ms: int) -> bool:
        return (
            not self.has_producer_id
            and not self._init_in_flight
            and now_ms >= self._init_retry_at_ms
        )

    def producer_id_poll_delay_ms(self, now_ms: int) -> int:
        """How long the Sender may block while it still needs a producer id."""
        if self._init_in_flight:
            return 2**31  # the response wakes the poll
        return max(self._init_retry_at_ms - now_ms, 0) or 10  # connecting: check again soon

    def init_producer_id_request(self, now_ms: int) -> dict[str, object]:
        self._init_in_flight = True
        return {
            "transactional_id": None,
            "transaction_timeout_ms": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        }

    def handle_init_producer_id_response(
        self, retry_backoff_ms: int, response: ClientResponse
    ) -> None:
        self._init_in_flight = False
        now_ms = response.received_time_ms
        if response.version_mismatch is not None:
            self.set_fatal_error(
                errors.UnsupportedVersionError(
                    "the broker does not support idempotent producing "
                    f"({response.version_mismatch}); set 'enable.idempotence' to false"
                )
            )
            return
        if response.body is None:  # disconnected or timed out: try again
            self._init_retry_at_ms = now_ms + retry_backoff_ms
            return
        code = response.body.get("error_code", 0)
        if code == 0:
            self.set_producer_id_and_epoch(
                response.body["producer_id"], response.body["producer_epoch"]
            )
            return
        error = errors.for_code(code)("InitProducerId")
        if error.retriable:
            log.warning(
                "%sInitProducerId failed (%s); retrying", self._prefix, type(error).__name__
            )
            self._init_retry_at_ms = now_ms + retry_backoff_ms
            return
        self.set_fatal_error(error)

    # ---- hooks a transactional producer fills in ---------------------------------------------

    @property
    def is_completing(self) -> bool:
        """A transaction is being committed or aborted: every batch is ready at once."""
        return False

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` was created (a caller's thread, under the topic's lock)."""

    def can_retry_sequence_error(self, batch: ProducerBatch, code: int) -> bool:
        """May a batch refused with OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID be
        retried? Always for an idempotent producer: it re-sequences under a new epoch."""
        return True

    def set_fatal_error(self, error: KafkaError) -> None:
        self.fatal_error = error
        log.error("%sfatal error; the producer cannot send any more: %s", self._prefix, error)
        self.on_fatal_error(error)

    def _state(self, tp: TopicPartition) -> PartitionSequences:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = PartitionSequences(self.producer_id_and_epoch)
        return state

    def partition_state(self, tp: TopicPartition) -> PartitionSequences | None:
        return self._partitions.get(tp)

    # ---- drain (Sender thread, under the topic lock) -------------------------------------

    def can_send(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """Java's ``shouldStopDrainBatchesForPartition``, negated."""
        if not self.has_producer_id:
            return False
        state = self._state(tp)
        if first.base_sequence != NO_SEQUENCE:
            # a retry: only the oldest unresolved batch of the partition goes out
            return bool(state.in_flight) and state.in_flight[0] is first
        if state.in_flight:
            # a new batch waits while there is a gap to resolve or older epochs in flight
            return (
                not state.needs_reset and state.producer_id_and_epoch == self.producer_id_and_epoch
            )
        if state.needs_reset or state.producer_id_and_epoch != self.producer_id_and_epoch:
            self._reset(tp, state)
        return True

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a drained batch its producer state, unless it is a retry that has one."""
        if batch.base_sequence != NO_SEQUENCE:
            return
        state = self._state(batch.tp)
        pid = self.producer_id_and_epoch
        batch.set_producer_state(pid.producer_id, pid.epoch, state.next_sequence)
        state.next_sequence = increment_sequence(state.next_sequence, batch.record_count)
        state.in_flight.append(batch)

    def _reset(self, tp: TopicPartition, state: PartitionSequences) -> None:
        if state.needs_reset and state.producer_id_and_epoch == self.producer_id_and_epoch:
            self._bump_epoch()
        log.info(
            "%sresetting sequence numbers of %s (producer id %d, epoch %d)",
            self._prefix,
            tp,
            *self.producer_id_and_epoch,
        )
        state.producer_id_and_epoch = self.producer_id_and_epoch
        state.next_sequence = 0
        state.last_acked_sequence = -1
        state.needs_reset = False

    def _bump_epoch(self) -> None:
        pid, epoch = self.producer_id_and_epoch
        self.epoch_bumps += 1
        if epoch >= EPOCH_MAX:
            log.info("%sepoch exhausted for producer id %d; requesting a new id", self._prefix, pid)
            self.producer_id_and_epoch = NO_PRODUCER_ID
            return
        self.producer_id_and_epoch = ProducerIdAndEpoch(pid, epoch + 1)
        log.info("%sbumped the epoch of producer id %d to %d", self._prefix, pid, epoch + 1)

    # ---- responses (Sender thread) ---------------------------------------------------------

    def on_success(self, batch: ProducerBatch) -> None:
        """The broker wrote the batch (or already had it: DUPLICATE_SEQUENCE_NUMBER)."""
        state = self._partitions.get(batch.tp)
        if state is None or batch.base_sequence == NO_SEQUENCE:
            return
        state.remove(batch)
        if batch.producer_id_and_epoch_matches(state.producer_id_and_epoch):
            state.last_acked_sequence = max(state.last_acked_sequence, batch.last_sequence)

    def on_failure(self, batch: ProducerBatch, error: BaseException | None = None) -> None:
        """The batch failed for good after being sequenced: its sequence range is a gap."""
        state = self._partitions.get(batch.tp)
        if state is None or batch.base_sequence == NO_SEQUENCE:
            return
        state.remove(batch)
        if batch.producer_id_and_epoch_matches(state.producer_id_and_epoch):
            state.needs_reset = True
            log.warning(
                "%sa sent batch of %s failed; its sequence numbers will be reset",
                self._prefix,
                batch.tp,
            )

    def is_next_in_line(self, batch: ProducerBatch) -> bool:
        """Whether the broker should have accepted this batch (it follows the last ack)."""
        state = self._partitions.get(batch.tp)
        if state is None:
            return True
        expected = (
            increment_sequence(state.last_acked_sequence, 1)
            if state.last_acked_sequence >= 0
            else 0
        )
        return batch.base_sequence == expected

    def should_resequence(self, batch: ProducerBatch) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER: retry as is (an earlier batch is being retried),
        or reject (not written; resend under a new epoch)."""
        state = self._partitions.get(batch.tp)
        return state is None or state.needs_reset or self.is_next_in_line(batch)

    def on_rejected(
        self, batch: ProducerBatch, on_the_wire: Collection[ProducerBatch] = ()
    ) -> None:
        """The broker did not write the batch and will not take its sequence: resend it
        after the partition's epoch bump (the batch is re-enqueued by the caller).

        The broker writes a partition's sequences in order, so the batches after this one
        were not written either. Those waiting to be retried give up their sequences too
        and are resent under the new epoch behind it (Java re-sequences them the same
        way); otherwise they would wait for ever for their turn as the oldest. Those in
        ``on_the_wire`` (sent, not answered) keep theirs until their answers come back.
        """
        state = self._partitions.get(batch.tp)
        if state is not None:
            if batch in state.in_flight:
                later = state.in_flight[state.in_flight.index(batch) + 1 :]
                for waiting in later:
                    if waiting not in on_the_wire:
                        state.in_flight.remove(waiting)
                        waiting.clear_producer_state()
            state.remove(batch)
            state.needs_reset = True
        batch.clear_producer_state()

    def on_split(self, parent: ProducerBatch, children: list[ProducerBatch]) -> None:
        """Children of a split batch take over the parent's sequence range."""
        state = self._partitions.get(parent.tp)
        if state is None or parent.base_sequence == NO_SEQUENCE:
            return
        sequence = parent.base_sequence
        index = state.in_flight.index(parent) if parent in state.in_flight else len(state.in_flight)
        state.remove(parent)
        for offset, child in enumerate(children):
            child.set_producer_state(parent.producer_id, parent.producer_epoch, sequence)
            sequence = increment_sequence(sequence, child.record_count)
            state.in_flight.insert(index + offset, child)

    def has_in_flight(self, tp: TopicPartition) -> bool:
        state = self._partitions.get(tp)
        return bool(state and state.in_flight)
