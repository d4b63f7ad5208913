"""What a client can make the broker spend: ListOffsets by timestamp reads one batch within
``max.message.bytes``, whatever a stored batch claims to expand to; a CreateTopics request
of many topics is answered in linear time; a Fetch answer holds at most
``fetch.max.bytes``."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from kclient import errors
from kclient.protocol import ApiKey
from kclient.record.compression import CompressionType, compress
from kclient.testing.hostile import raw_batch, record, zstd_bomb

from .conftest import NOW_MS


def batch_at_now(records: bytes, count: int, **kwargs: Any) -> bytes:
    return raw_batch(records, count, timestamp_ms=NOW_MS, **kwargs)


def list_offset(h: Any, timestamp: int) -> tuple[int, int]:
    body = h.call(
        ApiKey.LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}
            ],
        },
    )
    p = body["topics"][0]["partitions"][0]
    assert p["error_code"] == 0
    return p["offset"], p["timestamp"]


def test_list_offsets_finds_records_inside_compressed_batches(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    for codec in (CompressionType.GZIP, CompressionType.ZSTD):
        records = record(0, ts_delta=0) + record(1, ts_delta=10) + record(2, ts_delta=5)
        batch = batch_at_now(compress(codec, records), 3, codec=codec, max_timestamp=NOW_MS + 10)
        assert harness.produce("t", batch)["error_code"] == 0
    # offsets 0-2 gzip, 3-5 zstd; timestamps NOW, NOW+10, NOW+5 in each
    assert list_offset(harness, NOW_MS + 1) == (1, NOW_MS + 10)
    assert list_offset(harness, NOW_MS + 10) == (1, NOW_MS + 10)
    assert list_offset(harness, NOW_MS + 11) == (-1, -1)
    assert list_offset(harness, -3) == (1, NOW_MS + 10)  # the first with the greatest


def test_list_offsets_by_timestamp_reads_a_bomb_within_the_limit(harness: Any) -> None:
    """A stored zstd batch of 64 MiB of records (written before the broker validated
    batches): the lookup stops at max.message.bytes and answers from the header. On main
    it decompressed all of it (the issue: 2.1 GB for a 1 GiB bomb)."""
    harness.controller.create_topic("t", 1)
    bomb = bytearray(batch_at_now(zstd_bomb(64, 1 << 20), 64, codec=CompressionType.ZSTD))
    partition = harness.controller.partition("t", 0)
    with partition.lock:
        partition.log.append(bomb, [(0, len(bomb), 0, 63, NOW_MS)])
    tracemalloc.start()
    try:
        answers = [list_offset(harness, NOW_MS), list_offset(harness, -3)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answers == [(0, NOW_MS), (63, NOW_MS)]  # the batch's base and last offset
    assert peak < 4 << 20, peak


# ---- many topics in one CreateTopics request ---------------------------------------------


def create_topics(h: Any, *topics: tuple[str, int]) -> list[dict[str, Any]]:
    body = h.call(
        ApiKey.CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for name, partitions in topics
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    result: list[dict[str, Any]] = body["topics"]
    return result


def test_many_topics_in_one_request_are_answered_in_linear_time(make_harness: Any) -> None:
    """100,000 topic entries answered at once (the duplicate check was quadratic): the
    first max.partitions.per.topic created, the rest refused. (A cap of 1,000 rather than
    the default 10,000: the request's size is what a quadratic check shows on, and each
    topic created costs the Controller a scan of every topic, ~8 s for 10,000.)"""
    h = make_harness(max_partitions_per_topic=1000)
    results = create_topics(h, *((f"t{i}", 1) for i in range(100_000)))
    assert len(results) == 100_000
    names = [errors.error_name(r["error_code"]) for r in results]
    assert names.count("NONE") == 1000
    assert names.count("POLICY_VIOLATION") == 99_000


# ---- fetch.max.bytes, queued.max.request.bytes ------------------------------------------


def test_fetch_answers_hold_at_most_fetch_max_bytes(make_harness: Any, make_batch: Any) -> None:
    h = make_harness(fetch_max_bytes=5000)
    h.controller.create_topic("t", 1)
    for _ in range(10):
        assert h.produce("t", make_batch([b"v" * 1000]))["error_code"] == 0
    body = h.call(
        ApiKey.FETCH,
        12,
        h.fetch_body("t", 0, partition_max_bytes=2**31 - 1, max_bytes=2**31 - 1),
    )
    records = body["responses"][0]["partitions"][0]["records"]
    size = sum(len(r) for r in records) if isinstance(records, list) else len(records)
    assert 1000 < size <= 5000


@pytest.mark.parametrize("value", [0, -2, 1.5, True])
def test_queued_max_request_bytes_is_positive_or_minus_one(value: Any) -> None:
    from kclient.broker.config import BrokerConfig

    with pytest.raises(errors.ConfigError, match="'queued.max.request.bytes' must be"):
        BrokerConfig(queued_max_request_bytes=value)
    assert BrokerConfig(queued_max_request_bytes=-1).queued_max_request_bytes == -1
