"""PendingTxnOffsets: group offsets committed inside transactions, until their marker.

Kafka's ``pendingTransactionalOffsetCommits`` (``GroupMetadata`` / ``OffsetMetadataManager``):
a TxnOffsetCommit stores its offsets per producer id, invisible to OffsetFetch; the
transaction's COMMIT marker on the group's ``__consumer_offsets`` partition moves them
into the committed offsets (``ConsumerOffsets.commit_transactional``), an ABORT marker
drops them. ``has_pending`` tells OffsetFetch with ``require_stable`` which partitions
still wait for a marker (UNSTABLE_OFFSET_COMMIT).

Shared by the brokers of a cluster. With a log dir, ``<log_dir>/__consumer_offsets_txn/``
holds them as ``DurableRecords`` (``txn_log``): each TxnOffsetCommit is recorded before
it is answered, each marker's completion after the offsets moved, so a crash in between
moves them again (same values) when the coordinator rewrites the markers on start-up.
Thread-safe (one lock, taken inside a transactional id's lock, never around it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kclient import errors
from kclient.broker.consumer_offsets import (
    ConsumerOffsets,
    OffsetAndMetadata,
    TopicPartition,
    partition_for,
)
from kclient.broker.durable_records import COMPACT_BYTES, DurableRecords

log = logging.getLogger(__name__)

DIRECTORY = "__consumer_offsets_txn"
_MAGIC = b"KCTO"

#: producer id -> group id -> partition -> offset
_Pending = dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]


class PendingTxnOffsets:
    """Offsets of open transactions, per producer id and group."""

    def __init__(self, offsets: ConsumerOffsets, log_dir: Path | str | None = None) -> None:
        self._offsets = offsets
        self._lock = threading.Lock()
        self._pending: _Pending = {}
        self._records: DurableRecords | None = None
        if log_dir is not None:
            self._records = DurableRecords(Path(log_dir) / DIRECTORY, _MAGIC)
            snapshot, changes = self._records.load()
            for record in (snapshot or []) + changes:
                self._replay(record)
            self._records.compact(self._snapshot())

    def add(
        self, producer_id: int, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """A TxnOffsetCommit of ``producer_id``'s transaction. Raises KafkaStorageError."""
        record = {"k": "add", "pid": producer_id, "g": group_id, "o": _rows(offsets)}
        with self._lock:
            self._write(record)
            self._apply(record)

    def complete(self, producer_id: int, offsets_partition: int, committed: bool) -> None:
        """The transaction's marker for ``__consumer_offsets`` partition ``offsets_partition``:
        commit or drop its pending offsets of the groups there. Raises KafkaStorageError
        (the pending offsets are then kept, for the marker to be written again)."""
        with self._lock:
            groups = self._pending.get(producer_id, {})
            mine = {g: o for g, o in groups.items() if partition_for(g) == offsets_partition}
            if not mine:
                return
            if committed:
                for group_id, offsets in mine.items():
                    self._offsets.commit_transactional(group_id, offsets)
            record = {"k": "end", "pid": producer_id, "p": offsets_partition}
            self._write(record)
            self._apply(record)
            log.debug(
                "producer %d: %s the offsets of groups %s",
                producer_id,
                "committed" if committed else "dropped",
                sorted(mine),
            )

    def has_pending(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> set[TopicPartition]:
        """The partitions of ``partitions`` some open transaction has offsets of."""
        wanted = set(partitions)
        with self._lock:
            return {
                tp
                for groups in self._pending.values()
                for tp in groups.get(group_id, {})
                if tp in wanted
            }

    def pending(self, producer_id: int) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        with self._lock:
            return {g: dict(o) for g, o in self._pending.get(producer_id, {}).items()}

    # ---- persistence -------------------------------------------------------------------

    def _write(self, record: dict[str, Any]) -> None:
        if self._records is None:
            return
        self._records.append(record)
        if self._records.log_bytes >= COMPACT_BYTES:
            try:
                self._records.compact(self._snapshot())
            except errors.KafkaStorageError as exc:
                log.warning("%s", exc)

    def _replay(self, record: dict[str, Any]) -> None:
        try:
            self._apply(record)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("%s: skipping a record: %s", DIRECTORY, exc)

    def _apply(self, record: dict[str, Any]) -> None:
        producer_id = int(record["pid"])
        if record["k"] == "add":
            group = self._pending.setdefault(producer_id, {}).setdefault(str(record["g"]), {})
            for topic, partition, offset, epoch, metadata, timestamp_ms in record["o"]:
                group[str(topic), int(partition)] = OffsetAndMetadata(
                    int(offset), int(epoch), str(metadata), int(timestamp_ms)
                )
        elif record["k"] == "end":
            groups = self._pending.get(producer_id, {})
            for group_id in [g for g in groups if partition_for(g) == int(record["p"])]:
                del groups[group_id]
            if not groups:
                self._pending.pop(producer_id, None)
        else:
            raise ValueError(f"unknown record kind {record['k']!r}")

    def _snapshot(self) -> list[dict[str, Any]]:
        return [
            {"k": "add", "pid": pid, "g": group_id, "o": _rows(offsets)}
            for pid, groups in self._pending.items()
            for group_id, offsets in groups.items()
        ]

    def close(self) -> None:
        with self._lock:
            if self._records is None:
                return
            try:
                self._records.compact(self._snapshot())
            except errors.KafkaStorageError as exc:
                log.warning("%s (the records log is replayed at the next start)", exc)
            self._records.close()


def _rows(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[list[Any]]:
    return [
        [t, p, o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms]
        for (t, p), o in offsets.items()
    ]
