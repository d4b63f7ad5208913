"""TransactionStateManager: every transactional id's metadata, in memory or under the log dir.

Kafka's ``TransactionStateManager``: the coordinator of a transactional id is the leader
of partition ``abs(hash(id)) % 50`` of ``__transaction_state`` (the same hash as groups
use, ``consumer_offsets.partition_for``), and every transition of a transaction is a
record of that topic, written before the transition is taken and answered. The brokers
of an embedded cluster share one manager (as they share each partition's log); each
broker's ``TransactionCoordinator`` serves the ids it coordinates, and the coordinator
epoch of a state partition grows each time another broker takes it over (it is written
into the markers, as in Kafka).

With a log dir, ``<log_dir>/__transaction_state/`` holds the state as ``DurableRecords``
(``txn_log``): a snapshot of every id plus a log of transitions, replayed on start-up
(last record of an id wins). Transactions found in PrepareCommit/PrepareAbort then still
need their markers: the coordinators write them on start-up (``prepared``). The
coordinator epoch of each state partition is kept there too, so that it never goes back
after a restart (a partition fences markers of an older coordinator epoch).

Thread-safety, as Kafka's coordinator (a lock per ``TransactionMetadata``): each
transactional id has a lock (``locked``), held by its coordinator for a whole request that
reads and changes it (markers included) and by the timer while it aborts or expires it;
requests of different ids run at once. Partition locks, the pending offsets' lock and
``lock`` are taken inside an id's lock, never around it. ``lock`` itself guards only the
maps and the state log for the moment of a read or a write. (Kafka's read/write lock over
the state partitions guards their loading when coordinators move; here every broker of
the cluster shares the loaded state, so there is nothing to load.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from kclient import errors
from kclient.broker.consumer_offsets import coordinator_for, partition_for
from kclient.broker.durable_records import COMPACT_BYTES, DurableRecords
from kclient.broker.txn_metadata import TransactionMetadata, TransactionState

log = logging.getLogger(__name__)

DIRECTORY = "__transaction_state"
_MAGIC = b"KCTS"
_S = TransactionState


def txn_partition_for(transactional_id: str) -> int:
    """The ``__transaction_state`` partition of a transactional id (Kafka's ``partitionFor``)."""
    return partition_for(transactional_id)


def txn_coordinator_for(
    transactional_id: str, broker_ids: Sequence[int], live: Iterable[int]
) -> int:
    """The live broker coordinating ``transactional_id``; -1 when none is live."""
    return coordinator_for(transactional_id, broker_ids, live)


class TransactionStateManager:
    """Transaction metadata of a cluster, shared by its brokers' coordinators."""

    def __init__(self, log_dir: Path | str | None = None, *, max_timeout_ms: int = 900_000) -> None:
        self.lock = threading.RLock()
        self._id_locks: dict[str, threading.RLock] = {}
        self.max_timeout_ms = max_timeout_ms
        self._txns: dict[str, TransactionMetadata] = {}
        self._owners: dict[int, tuple[int, int]] = {}  # state partition -> (node, epoch)
        self._records: DurableRecords | None = None
        if log_dir is not None:
            self._records = DurableRecords(Path(log_dir) / DIRECTORY, _MAGIC)
            self._load(self._records)

    @contextmanager
    def locked(self, transactional_id: str) -> Iterator[None]:
        """Hold ``transactional_id``'s lock (re-entrant): every change of its metadata,
        and the markers written for it, happen under it."""
        while True:
            with self.lock:
                id_lock = self._id_locks.get(transactional_id)
                if id_lock is None:
                    id_lock = self._id_locks[transactional_id] = threading.RLock()
            id_lock.acquire()
            if self._id_locks.get(transactional_id) is id_lock:
                break
            id_lock.release()  # the id expired while we waited: take its new lock
        try:
            yield
        finally:
            id_lock.release()

    def validate_timeout(self, timeout_ms: int) -> bool:
        """Kafka's ``validateTransactionTimeoutMs``."""
        return 0 < timeout_ms <= self.max_timeout_ms

    # ---- ownership ---------------------------------------------------------------------

    def coordinator_epoch(self, transactional_id: str, node_id: int) -> int:
        """Broker ``node_id`` coordinates ``transactional_id``: the epoch of its state
        partition (one more each time another broker took it)."""
        partition = txn_partition_for(transactional_id)
        with self.lock:
            owner = self._owners.get(partition)
            if owner is None or owner[0] != node_id:
                owner = (node_id, owner[1] + 1 if owner is not None else 0)
                if self._records is not None:  # markers carry it: it must never go back
                    self._records.append({"owner": partition, "node": owner[0], "epoch": owner[1]})
                self._owners[partition] = owner
            return owner[1]

    # ---- reads and writes --------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        with self.lock:
            return self._txns.get(transactional_id)

    def transactions(self) -> list[TransactionMetadata]:
        with self.lock:
            return list(self._txns.values())

    def put(self, metadata: TransactionMetadata) -> None:
        """Write a transition, then take it. Raises KafkaStorageError (nothing changed)."""
        with self.lock:
            if self._records is not None:
                self._records.append(metadata.to_json())
                if self._records.log_bytes >= COMPACT_BYTES:
                    self._compact()
            if metadata.state is _S.DEAD:
                self._txns.pop(metadata.transactional_id, None)
                self._id_locks.pop(metadata.transactional_id, None)  # the caller holds it
            else:
                self._txns[metadata.transactional_id] = metadata

    def prepared(self) -> list[TransactionMetadata]:
        """Transactions whose markers are still to be written."""
        with self.lock:
            return [
                m for m in self._txns.values() if m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
            ]

    # ---- persistence -------------------------------------------------------------------

    def _load(self, records: DurableRecords) -> None:
        snapshot, changes = records.load()
        rows = list(snapshot["transactions"]) if isinstance(snapshot, dict) else []
        if isinstance(snapshot, dict):
            rows += [{"owner": p, "node": n, "epoch": e} for p, n, e in snapshot.get("owners", [])]
        for row in rows + changes:
            if "owner" in row:
                self._owners[int(row["owner"])] = (int(row["node"]), int(row["epoch"]))
                continue
            try:
                metadata = TransactionMetadata.from_json(row)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning(
                    "%s: skipping an unreadable transaction record: %s", records.directory, exc
                )
                continue
            if metadata.state is _S.DEAD:
                self._txns.pop(metadata.transactional_id, None)
            else:
                self._txns[metadata.transactional_id] = metadata
        log.info("loaded %d transactional ids from %s", len(self._txns), records.directory)
        self._compact()

    def _compact(self) -> None:
        assert self._records is not None
        try:
            self._records.compact(
                {
                    "transactions": [m.to_json() for m in self._txns.values()],
                    "owners": [[p, n, e] for p, (n, e) in sorted(self._owners.items())],
                }
            )
        except errors.KafkaStorageError as exc:
            if self._records.log_bytes == 0:
                raise
            log.warning("%s", exc)  # the records stay in the log; compacted next time

    def close(self) -> None:
        """Compact into the snapshot (clean shutdown)."""
        with self.lock:
            if self._records is None:
                return
            try:
                self._compact()
            except errors.KafkaStorageError as exc:
                log.warning("%s (the records log is replayed at the next start)", exc)
            self._records.close()
