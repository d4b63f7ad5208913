"""ConsumerOffsets: the embedded cluster's ``__consumer_offsets``, committed offsets and
group records, in memory or under the log dir.

Kafka keeps committed offsets (``OffsetCommitKey/Value``) and each group's metadata
(``GroupMetadataKey/Value``: generation, protocol, leader, members with their
subscription and assignment) as records of the compacted ``__consumer_offsets`` topic;
the coordinator of a group is the leader of partition ``abs(hash(group)) % 50`` of it
(``partition_for`` / ``coordinator_for``), and a broker that becomes coordinator loads
the group from there. The embedded cluster's brokers share one ``ConsumerOffsets`` (as
they share each partition's log); a broker *claims* a group when it starts to
coordinate it, and a write from a broker that is no longer the owner fails with
NOT_COORDINATOR (Kafka's coordinator epoch fencing).

With a log dir, ``<log_dir>/__consumer_offsets/`` holds:

* ``snapshot``: every group's record and offsets, a sealed (CRC-checked) JSON file
  written atomically (``durable_file``);
* ``records.log``: the changes since, appended before a commit is answered, one frame
  each: int32 length, uint32 CRC-32C of the body, the body (JSON).

On start-up the snapshot is read and the records replayed (a torn or corrupt frame at
the end, left by a crash, ends the replay), then compacted into a new snapshot. Like
the partition logs, an answered commit survives a crash of the process (kill -9); the
snapshot is also flushed when the log passes ``COMPACT_BYTES`` and at close; the files are
``durable_records.DurableRecords``'s, as for transaction state.

Offsets committed inside a transaction wait apart, per producer id, in ``txn_offsets``
(Kafka's ``pendingTransactionalOffsetCommits``) until its COMMIT marker hands them here
(``commit_transactional``). Thread-safe (one lock); reads return copies.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kclient import errors
from kclient.broker.durable_records import COMPACT_BYTES, DurableRecords

log = logging.getLogger(__name__)

#: Kafka's ``offsets.topic.num.partitions``: groups hash onto this many partitions.
OFFSETS_TOPIC_NUM_PARTITIONS = 50
DIRECTORY = "__consumer_offsets"
_MAGIC = b"KCOS"
_VERSION = 1

TopicPartition = tuple[str, int]


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, int32 arithmetic)."""
    h = 0
    raw = value.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str) -> int:
    """The ``__consumer_offsets`` partition of a group (Kafka's ``partitionFor``:
    ``Utils.abs(groupId.hashCode) % 50``, where ``Utils.abs`` of the smallest int is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % OFFSETS_TOPIC_NUM_PARTITIONS


def coordinator_for(group_id: str, broker_ids: Sequence[int], live: Iterable[int]) -> int:
    """The broker coordinating ``group_id``: its partition's preferred replica (partition
    p's is broker p mod N), else the next live broker; -1 when none is live."""
    alive = set(live)
    n = len(broker_ids)
    start = partition_for(group_id) % n
    for i in range(n):
        node = broker_ids[(start + i) % n]
        if node in alive:
            return node
    return -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the next offset to consume, with what the committer added."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the metadata of the group's selected protocol
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    """A group as written when it becomes Stable or Empty (Kafka's GroupMetadataValue)."""

    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[StoredMember, ...] = ()


class _Entry:
    __slots__ = ("group", "offsets")

    def __init__(self) -> None:
        self.group: StoredGroup | None = None
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}


class ConsumerOffsets:
    """Committed offsets and group records of every group, shared by a cluster's brokers."""

    def __init__(self, log_dir: Path | str | None = None) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, _Entry] = {}
        self._owners: dict[str, int] = {}
        self._store: DurableRecords | None = None
        self._closed = False
        if log_dir is not None:
            self._store = DurableRecords(Path(log_dir) / DIRECTORY, _MAGIC, _VERSION)
            self._load(self._store)
            self._compact()

    # ---- ownership ---------------------------------------------------------------------

    def claim(self, group_id: str, node_id: int) -> tuple[StoredGroup | None, bool]:
        """Broker ``node_id`` now coordinates ``group_id``: its stored record and whether
        the group exists (a record or committed offsets)."""
        with self._lock:
            self._owners[group_id] = node_id
            entry = self._groups.get(group_id)
            if entry is None:
                return None, False
            return entry.group, True

    def _check_owner(self, group_id: str, node_id: int) -> None:
        if self._owners.get(group_id) != node_id:
            raise errors.NotCoordinatorError(
                f"broker {node_id} no longer coordinates group {group_id!r}"
            )

    # ---- writes ------------------------------------------------------------------------

    def store_group(self, group_id: str, node_id: int, group: StoredGroup) -> None:
        """Record the group's metadata. Raises NotCoordinatorError, KafkaStorageError."""
        with self._lock:
            self._check_owner(group_id, node_id)
            self._append({"k": "group", "g": group_id, "v": _group_json(group)})
            self._entry(group_id).group = group

    def commit(
        self, group_id: str, node_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Store committed offsets (all or nothing). Raises NotCoordinatorError,
        KafkaStorageError."""
        with self._lock:
            self._check_owner(group_id, node_id)
            rows = [_offset_json(tp, o) for tp, o in offsets.items()]
            self._append({"k": "offsets", "g": group_id, "o": rows})
            self._entry(group_id).offsets.update(offsets)

    def commit_transactional(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Store offsets a transaction committed (its COMMIT marker moves them here from
        ``txn_offsets``; the transaction coordinator, not the group's, decides). Raises
        KafkaStorageError."""
        with self._lock:
            rows = [_offset_json(tp, o) for tp, o in offsets.items()]
            self._append({"k": "offsets", "g": group_id, "o": rows})
            self._entry(group_id).offsets.update(offsets)

    def delete_offsets(
        self, group_id: str, node_id: int, partitions: Iterable[TopicPartition]
    ) -> int:
        """Remove committed offsets; how many there were."""
        with self._lock:
            self._check_owner(group_id, node_id)
            entry = self._groups.get(group_id)
            present = [tp for tp in partitions if entry is not None and tp in entry.offsets]
            if not present or entry is None:
                return 0
            self._append({"k": "unset", "g": group_id, "p": [list(tp) for tp in present]})
            for tp in present:
                del entry.offsets[tp]
            return len(present)

    def delete_group(self, group_id: str, node_id: int) -> int:
        """Forget the group and its offsets (DeleteGroups); how many offsets it had."""
        with self._lock:
            self._check_owner(group_id, node_id)
            entry = self._groups.get(group_id)
            if entry is None:
                return 0
            self._append({"k": "delete", "g": group_id})
            del self._groups[group_id]
            return len(entry.offsets)

    def drop_topic(self, topic: str) -> int:
        """The topic was deleted: drop every group's offsets of it; how many there were."""
        with self._lock:
            removed = sum(1 for e in self._groups.values() for (t, _) in e.offsets if t == topic)
            if removed:
                self._append({"k": "drop_topic", "t": topic})
                self._apply_drop_topic(topic)
            return removed

    # ---- reads -------------------------------------------------------------------------

    def offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        with self._lock:
            entry = self._groups.get(group_id)
            return dict(entry.offsets) if entry is not None else {}

    def group(self, group_id: str) -> StoredGroup | None:
        with self._lock:
            entry = self._groups.get(group_id)
            return entry.group if entry is not None else None

    def group_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._groups)

    def topics(self) -> set[str]:
        """Topics some group has committed offsets of."""
        with self._lock:
            return {t for e in self._groups.values() for (t, _) in e.offsets}

    # ---- persistence -------------------------------------------------------------------

    def _entry(self, group_id: str) -> _Entry:
        entry = self._groups.get(group_id)
        if entry is None:
            entry = self._groups[group_id] = _Entry()
        return entry

    def _apply_drop_topic(self, topic: str) -> None:
        for entry in self._groups.values():
            for tp in [tp for tp in entry.offsets if tp[0] == topic]:
                del entry.offsets[tp]

    def _append(self, record: dict[str, Any]) -> None:
        """Write one record before the change is applied (called under the lock)."""
        store = self._store
        if store is None:
            return
        store.append(record)
        if store.log_bytes >= COMPACT_BYTES:
            try:
                self._compact()
            except errors.KafkaStorageError as exc:
                log.warning("%s", exc)  # the records stay in the log; compacted next time

    def _apply(self, record: dict[str, Any]) -> None:
        kind = record["k"]
        if kind == "drop_topic":
            self._apply_drop_topic(str(record["t"]))
            return
        group_id = str(record["g"])
        if kind == "offsets":
            entry = self._entry(group_id)
            for row in record["o"]:
                tp, offset = _offset_from_json(row)
                entry.offsets[tp] = offset
        elif kind == "group":
            self._entry(group_id).group = _group_from_json(record["v"])
        elif kind == "unset":
            unset_entry = self._groups.get(group_id)
            if unset_entry is not None:
                for t, p in record["p"]:
                    unset_entry.offsets.pop((str(t), int(p)), None)
        elif kind == "delete":
            self._groups.pop(group_id, None)
        else:
            raise ValueError(f"unknown record kind {kind!r}")

    def _load(self, store: DurableRecords) -> None:
        value, records = store.load()
        if value is not None:
            try:
                for group_id, stored in value["groups"].items():
                    entry = self._entry(group_id)
                    if stored.get("group") is not None:
                        entry.group = _group_from_json(stored["group"])
                    for row in stored["offsets"]:
                        tp, offset = _offset_from_json(row)
                        entry.offsets[tp] = offset
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                self._groups.clear()
                log.warning(
                    "%s holds no consumer offsets kclient can read (%s): committed offsets "
                    "written before its last compaction are lost, and consumers of those "
                    "groups start from their auto.offset.reset position",
                    store.directory,
                    exc,
                )
        for record in records:
            self._replay(store, record)
        log.info("replayed %d consumer offsets records from %s", len(records), store.directory)

    def _replay(self, store: DurableRecords, record: Any) -> None:
        try:
            self._apply(record)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s: skipping an unreadable record: %s", store.directory, exc)

    def _compact(self) -> None:
        """Write the whole state as the snapshot, then start an empty records log."""
        assert self._store is not None
        groups = {
            group_id: {
                "group": _group_json(entry.group) if entry.group is not None else None,
                "offsets": [_offset_json(tp, o) for tp, o in entry.offsets.items()],
            }
            for group_id, entry in self._groups.items()
        }
        self._store.compact({"groups": groups})

    def close(self) -> None:
        """Compact into the snapshot and close the records log (clean shutdown)."""
        with self._lock:
            if self._store is None or self._closed:
                return
            self._closed = True
            try:
                self._compact()
            except errors.KafkaStorageError as exc:
                log.warning("%s (the records log is replayed at the next start)", exc)
            self._store.close()


# ---- JSON forms ----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _offset_json(tp: TopicPartition, o: OffsetAndMetadata) -> list[Any]:
    return [tp[0], tp[1], o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms]


def _offset_from_json(row: list[Any]) -> tuple[TopicPartition, OffsetAndMetadata]:
    topic, partition, offset, epoch, metadata, timestamp_ms = row
    return (str(topic), int(partition)), OffsetAndMetadata(
        int(offset), int(epoch), str(metadata), int(timestamp_ms)
    )


def _group_json(g: StoredGroup) -> dict[str, Any]:
    return {
        "protocol_type": g.protocol_type,
        "generation": g.generation_id,
        "protocol": g.protocol_name,
        "leader": g.leader_id,
        "state_timestamp_ms": g.state_timestamp_ms,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "session_timeout_ms": m.session_timeout_ms,
                "subscription": _b64(m.subscription),
                "assignment": _b64(m.assignment),
            }
            for m in g.members
        ],
    }


def _group_from_json(v: dict[str, Any]) -> StoredGroup:
    return StoredGroup(
        v["protocol_type"],
        int(v["generation"]),
        v["protocol"],
        v["leader"],
        int(v["state_timestamp_ms"]),
        tuple(
            StoredMember(
                str(m["member_id"]),
                m["group_instance_id"],
                str(m["client_id"]),
                str(m["client_host"]),
                int(m["rebalance_timeout_ms"]),
                int(m["session_timeout_ms"]),
                base64.b64decode(m["subscription"]),
                base64.b64decode(m["assignment"]),
            )
            for m in v["members"]
        ),
    )
