"""Helpers for the transaction tests: requests of a transactional producer through Apis."""

from __future__ import annotations

from typing import Any

from kclient.protocol import ApiKey
from kclient.record import RecordBatchBuilder, iter_batches
from tests.broker.conftest import NOW_MS, ApiHarness


def txn_batch(
    values: list[bytes],
    producer_id: int,
    epoch: int,
    base_sequence: int,
    *,
    transactional: bool = True,
) -> bytes:
    builder = RecordBatchBuilder("none", batch_size=1 << 30, is_transactional=transactional)
    builder.set_producer_state(producer_id, epoch, base_sequence)
    for i, value in enumerate(values):
        builder.append(NOW_MS + i, None, value)
    return builder.build()


class TxnClient:
    """What a transactional producer sends, one request at a time (node 0 by default)."""

    def __init__(self, h: ApiHarness, transactional_id: str, node: int = 0) -> None:
        self.h = h
        self.transactional_id = transactional_id
        self.node = node
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}

    def init(self, timeout_ms: int = 60_000, *, kip360: bool = False, version: int = 4) -> int:
        body: dict[str, Any] = {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": timeout_ms,
        }
        if kip360:
            body |= {"producer_id": self.producer_id, "producer_epoch": self.epoch}
        r = self.h.call(ApiKey.INIT_PRODUCER_ID, version, body, self.node)
        if r["error_code"] == 0:
            self.producer_id, self.epoch = r["producer_id"], r["producer_epoch"]
            self.sequences.clear()
        code: int = r["error_code"]
        return code

    def add_partitions(
        self, *partitions: tuple[str, int], version: int = 3
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        r = self.h.call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            version,
            {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
            self.node,
        )
        return {
            (t["name"], p["partition_index"]): p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        }

    def add_offsets(self, group_id: str) -> int:
        r = self.h.call(
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "group_id": group_id,
            },
            self.node,
        )
        code: int = r["error_code"]
        return code

    def produce(
        self, topic: str, values: list[bytes], partition: int = 0, version: int = 9, **kw: Any
    ) -> dict[str, Any]:
        seq = self.sequences.get((topic, partition), 0)
        result = self.h.produce(
            topic,
            txn_batch(values, self.producer_id, self.epoch, seq, **kw),
            partition=partition,
            version=version,
            transactional_id=self.transactional_id,
        )
        if result["error_code"] == 0:
            self.sequences[topic, partition] = seq + len(values)
        return result

    def end(self, commit: bool, version: int = 3) -> int:
        code: int = self.end_txn(commit, version)["error_code"]
        return code

    def end_v2(self, commit: bool, *, take_epoch: bool = True) -> int:
        """EndTxn v5 (transaction version 2): on success the producer goes on with the
        producer id and epoch answered (``take_epoch``), its sequences from 0."""
        r = self.end_txn(commit, 5)
        if r["error_code"] == 0 and take_epoch:
            assert r["producer_id"] >= 0 and r["producer_epoch"] >= 0
            self.producer_id, self.epoch = r["producer_id"], r["producer_epoch"]
            self.sequences.clear()
        code: int = r["error_code"]
        return code

    def end_txn(self, commit: bool, version: int) -> dict[str, Any]:
        r: dict[str, Any] = self.h.call(
            ApiKey.END_TXN,
            version,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "committed": commit,
            },
            self.node,
        )
        return r

    def txn_offset_commit(
        self, group_id: str, offsets: dict[tuple[str, int], int], version: int = 3
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append(
                {"partition_index": p, "committed_offset": o, "committed_metadata": ""}
            )
        r = self.h.call(
            ApiKey.TXN_OFFSET_COMMIT,
            version,
            {
                "transactional_id": self.transactional_id,
                "group_id": group_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
            self.node,
        )
        return {
            (t["name"], p["partition_index"]): p["error_code"]
            for t in r["topics"]
            for p in t["partitions"]
        }


def fetch(
    h: ApiHarness, topic: str, offset: int = 0, *, read_committed: bool, partition: int = 0
) -> dict[str, Any]:
    """The one partition of a Fetch v11 at ``offset``."""
    body = h.fetch_body(topic, offset, partition=partition)
    body["isolation_level"] = 1 if read_committed else 0
    out: dict[str, Any] = h.call(ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]
    return out


def values(fetched: dict[str, Any]) -> list[bytes | None]:
    """Values a consumer would see in a fetched partition: control batches left out and,
    for read_committed (``aborted_transactions`` listed), the records of the aborted
    transactions dropped the way Kafka's consumer does it."""
    aborted = sorted(
        (a["first_offset"], a["producer_id"]) for a in fetched["aborted_transactions"] or ()
    )
    aborting: set[int] = set()
    out: list[bytes | None] = []
    for b in iter_batches(bytes(fetched["records"] or b"")):
        while aborted and aborted[0][0] <= b.base_offset:
            aborting.add(aborted.pop(0)[1])
        if b.is_control:
            aborting.discard(b.producer_id)
        elif not (b.is_transactional and b.producer_id in aborting):
            out.extend(r.value for r in b.records())
    return out
