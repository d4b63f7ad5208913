"""What a transactional producer left in a partition's log, read back through Fetch
(read_uncommitted, with kclient's own blocking admin client), and the view a
``read_committed`` reader must have of it.

tansu 0.6.0 (in-memory storage) writes the COMMIT/ABORT control batches but answers Fetch
with no aborted transactions and a last stable offset at the high watermark, so its
``read_committed`` consumers see aborted records too. Tests therefore check the markers
themselves, and compute the read_committed view from them as Kafka's consumers do.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kclient.cli.admin import ClusterReader
from kclient.protocol import ApiKey
from kclient.record import iter_batches

ABORT, COMMIT = 0, 1


@dataclass(frozen=True)
class Entry:
    """A record of the log, or a control marker (``control`` is ABORT or COMMIT)."""

    offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: int | None
    value: bytes | None


def read_log(bootstrap: str, topic: str, partition: int) -> list[Entry]:
    """Every record and control marker of the partition, in offset order."""
    reader = ClusterReader(bootstrap)
    try:
        conn = reader.node(reader.leaders(topic)[partition])
        body = conn.request(
            ApiKey.FETCH,
            {
                "replica_id": -1,
                "max_wait_ms": 100,
                "min_bytes": 1,
                "max_bytes": 8 << 20,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "fetch_offset": 0,
                                "partition_max_bytes": 8 << 20,
                            }
                        ],
                    }
                ],
            },
        )
    finally:
        reader.close()
    data = body["responses"][0]["partitions"][0]
    assert data["error_code"] == 0, data
    entries = []
    for batch in iter_batches(data["records"] or b""):
        for record in batch.records():
            control = None
            if batch.is_control:
                assert record.key is not None
                _, control = struct.unpack(">hh", record.key[:4])
            entries.append(
                Entry(
                    record.offset,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.is_transactional,
                    control,
                    None if batch.is_control else record.value,
                )
            )
    return entries


def markers(entries: list[Entry]) -> list[int]:
    return [e.control for e in entries if e.control is not None]


def read_committed(entries: list[Entry]) -> list[bytes | None]:
    """Values a read_committed reader gets: a producer's transactional records once its
    COMMIT marker follows them, never those its ABORT marker ends, and nothing from the
    first record of a transaction still open on."""
    visible: list[tuple[int, bytes | None]] = []
    open_txns: dict[int, list[Entry]] = {}
    for entry in entries:
        if entry.control is not None:
            pending = open_txns.pop(entry.producer_id, [])
            if entry.control == COMMIT:
                visible.extend((e.offset, e.value) for e in pending)
        elif entry.transactional:
            open_txns.setdefault(entry.producer_id, []).append(entry)
        else:
            visible.append((entry.offset, entry.value))
    # the last stable offset: nothing at or after the first record of an open transaction
    stable = min((txn[0].offset for txn in open_txns.values()), default=None)
    ordered = sorted(visible, key=lambda item: item[0])
    return [value for offset, value in ordered if stable is None or offset < stable]
