"""kclient.aio's ``create_batch``/``send_batch`` on a scripted client (no sockets): a
batch goes through the producer's bulk path as one record batch, waits for
``buffer.memory`` without blocking the loop, and reports the rows that could not go.

The producer's I/O thread really runs (as in ``test_aio``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kclient.aio import AIOKafkaProducer
from kclient.errors import BufferExhaustedError, SendBatchError
from kclient.network.kafka_client import ClientRequest
from kclient.record import RecordBatch
from tests.test_producer import LiveMockClient


class BatchCountingClient(LiveMockClient):
    """``LiveMockClient`` that also notes how many records each record batch held."""

    def __init__(self) -> None:
        super().__init__(partitions=2)
        self.batch_sizes: list[int] = []

    def answer(self, request: ClientRequest) -> dict[str, Any]:
        for topic in request.body_for(12)["topic_data"]:
            for part in topic["partition_data"]:
                self.batch_sizes.append(RecordBatch(part["records"]).record_count)
        return super().answer(request)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def producer(client: LiveMockClient, **kwargs: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", kafka_client=client, **kwargs)


def test_a_batch_goes_as_one_record_batch_and_its_future_gives_the_first_offset() -> None:
    client = BatchCountingClient()

    async def main() -> None:
        async with producer(client, max_batch_size=64 * 1024) as p:
            await p.send_and_wait("t", b"before", partition=1)
            batch = p.create_batch()
            for i in range(300):
                assert batch.append(key=b"k%d" % i, value=b"v%d" % i, timestamp=1000 + i)
            metadata = await (await p.send_batch(batch, "t", partition=1))
            assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 1, 1)
            assert metadata.timestamp == 1000

    run(main())
    assert client.batch_sizes == [1, 300]
    records = client.records[("t", 1)][1:]
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(300)
    ]


def test_a_batch_waits_for_buffer_memory_and_all_its_rows_go_in_order() -> None:
    client = BatchCountingClient()

    async def main() -> None:
        async with producer(client, buffer_memory=8192, max_batch_size=2048) as p:
            client.hold = True  # nothing acknowledged: the buffer fills up
            with pytest.raises(BufferExhaustedError):
                for _ in range(10):
                    p._started().send("t", b"x" * 1500, partition=0)
            batch = p.create_batch()
            while batch.append(key=None, value=b"y" * 100, timestamp=None) is not None:
                pass
            sending = asyncio.ensure_future(p.send_batch(batch, "t", partition=1))
            await asyncio.sleep(0.05)
            assert not sending.done()  # awaiting memory; the loop runs on
            client.hold = False
            client.release()
            metadata = await (await sending)
            assert (metadata.partition, metadata.offset) == (1, 0)
            assert len(client.records[("t", 1)]) == batch.record_count() > 10

    run(main())


def test_rows_that_find_no_memory_within_max_block_ms_fail_by_row() -> None:
    client = BatchCountingClient()

    async def main() -> None:
        async with producer(client, buffer_memory=4096, max_batch_size=1024, max_block_ms=100) as p:
            client.hold = True
            batch = p.create_batch()
            batch._max_size = 10_000  # more rows than the buffer holds
            for i in range(60):
                batch.append(key=None, value=b"%03d" % i + b"z" * 97, timestamp=None)
            future = await p.send_batch(batch, "t", partition=0)
            await asyncio.sleep(0.05)
            client.hold = False
            client.release()
            with pytest.raises(SendBatchError) as exc_info:
                await future
            failed = sorted(exc_info.value.errors)
            assert failed and failed == list(range(failed[0], 60)) and failed[0] > 0
            assert all(isinstance(e, BufferExhaustedError) for e in exc_info.value.errors.values())
            assert "max_block_ms" in str(exc_info.value.errors[failed[0]])
            delivered = client.records[("t", 0)]
            assert [r.value[:3] for r in delivered] == [b"%03d" % i for i in range(failed[0])]

    run(main())


@pytest.mark.parametrize("with_headers", [False, True], ids=["bulk-path", "row-by-row"])
def test_a_batch_holds_bytes_and_skips_the_serializers_as_in_aiokafka(with_headers: bool) -> None:
    client = BatchCountingClient()

    async def main() -> None:
        async with producer(
            client, value_serializer=lambda v: v.encode(), key_serializer=lambda k: k.encode()
        ) as p:
            await p.send_and_wait("t", "text", key="key", partition=0)  # send serializes
            batch = p.create_batch()
            headers = [("h", b"1")] if with_headers else []
            assert batch.append(key=b"raw-key", value=b"raw", timestamp=None, headers=headers)
            await (await p.send_batch(batch, "t", partition=0))

    run(main())
    assert [(r.key, r.value) for r in client.records[("t", 0)]] == [
        (b"key", b"text"),
        (b"raw-key", b"raw"),
    ]
