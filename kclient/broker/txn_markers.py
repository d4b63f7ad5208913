"""TransactionMarkerWriter: COMMIT/ABORT markers written in-process to a transaction's partitions.

Kafka's ``TransactionMarkerChannelManager`` sends WriteTxnMarkers requests to the leader
of every partition of a transaction and retries until each is written. Inside the
embedded cluster every broker shares the partition logs, so the coordinator writes each
marker itself (``Log.append_marker`` under the partition's lock) and wakes the fetches
waiting on the partition; the group offsets of the transaction (its
``__consumer_offsets`` partitions) are committed or dropped by ``PendingTxnOffsets``.

It also registers partitions in a producer's transaction (``register``: Kafka's
verification guard, what lets a transactional batch in) for AddPartitionsToTxn and for
the produce path's verification. Called with the transactional id's lock held
(``TransactionStateManager.locked``), on request handler threads or the purgatory's
reaper thread; markers of different transactions may be written at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kclient import errors
from kclient.broker.consumer_offsets import DIRECTORY as OFFSETS_TOPIC
from kclient.broker.controller import Controller, Partition
from kclient.broker.txn_metadata import TopicPartition
from kclient.broker.txn_offsets import PendingTxnOffsets

log = logging.getLogger(__name__)

#: The group offsets "partition" a transaction holds after AddOffsetsToTxn.
GROUP_OFFSETS_TOPIC = OFFSETS_TOPIC


class TransactionMarkerWriter:
    """Writes the markers of the transactions of one cluster."""

    def __init__(self, controller: Controller, pending_offsets: PendingTxnOffsets) -> None:
        self.controller = controller
        self.pending_offsets = pending_offsets

    def register(self, partitions: Iterable[TopicPartition], producer_id: int, epoch: int) -> None:
        """The partitions are in ``producer_id``'s transaction at ``epoch`` now."""
        for topic, index in partitions:
            partition = self.controller.partition(topic, index)
            if partition is not None:
                with partition.lock:
                    partition.producer_state.verified[producer_id] = epoch

    def write_markers(
        self,
        partitions: Iterable[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        committed: bool,
        now_ms: int,
    ) -> list[TopicPartition]:
        """Write a marker to every partition; the partitions it could not be written to
        (a storage error: to be tried again). Deleted partitions and partitions where the
        producer has a newer epoch already are skipped, as Kafka's marker handler does."""
        failed: list[TopicPartition] = []
        for tp in sorted(partitions):
            topic, index = tp
            if topic == GROUP_OFFSETS_TOPIC:
                try:
                    self.pending_offsets.complete(producer_id, index, committed)
                except errors.KafkaStorageError as exc:
                    log.warning("producer %d: offsets of %s-%d: %s", producer_id, topic, index, exc)
                    failed.append(tp)
                continue
            partition = self.controller.partition(topic, index)
            if partition is None:
                log.info(
                    "producer %d: no marker for %s-%d, which is gone", producer_id, topic, index
                )
                continue
            code = self.write(
                partition,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                committed=committed,
                now_ms=now_ms,
            )
            if code == errors.KafkaStorageError.code:
                failed.append(tp)
        return failed

    def write(
        self,
        partition: Partition,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        now_ms: int,
    ) -> int:
        """Write one marker to ``partition``; Kafka's error code (0: written).
        INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED: refused (a newer
        producer or coordinator wrote there); KAFKA_STORAGE_ERROR: to be tried again."""
        with partition.lock:
            try:
                partition.log.append_marker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    coordinator_epoch=coordinator_epoch,
                    committed=committed,
                    leader_epoch=partition.leader_epoch,
                    now_ms=now_ms,
                )
            except (
                errors.InvalidProducerEpochError,
                errors.TransactionCoordinatorFencedError,
            ) as exc:
                log.warning("%s: no marker: %s", partition.name, exc)
                return exc.code
            except OSError as exc:
                log.error("%s: cannot write a transaction marker: %s", partition.name, exc)
                return errors.KafkaStorageError.code
        self.controller.notify_append(partition)
        return 0
