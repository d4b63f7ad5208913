"""kclient.aio.AIOKafkaProducer on a scripted client (no sockets): aiokafka's keywords,
its lifecycle, and what ``send`` guarantees when it awaits or is cancelled.

The producer's I/O thread really runs (as in ``test_producer``); ``LiveMockClient``
answers like a broker unless told to hold.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kclient.aio import AIOKafkaProducer
from kclient.errors import BufferExhaustedError, ConfigError, IllegalStateError, KafkaTimeoutError
from kclient.testing.client import metadata_update_with
from tests.test_producer import LiveMockClient


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def producer(client: LiveMockClient, **kwargs: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", kafka_client=client, **kwargs)


def test_aiokafka_keywords_map_to_settings_and_unsupported_ones_say_so() -> None:
    async def main() -> None:
        p = producer(
            LiveMockClient(),
            max_batch_size=1000,
            compression_type=None,
            acks=1,
            enable_idempotence=False,
            **{"retry.backoff.ms": 7},
        )
        await p.start()
        try:
            config = p._started().config
            assert (config.batch_size, config.compression_type, config.acks) == (1000, "none", 1)
            assert (config.retry_backoff_ms, config.linger_ms, config.max_block_ms) == (7, 0, 0)
        finally:
            await p.stop()

    run(main())
    with pytest.raises(ConfigError, match="GSSAPI uses the host name each connection is made to"):
        AIOKafkaProducer(sasl_kerberos_domain_name="kafka.example")
    with pytest.raises(ConfigError, match="api_version"):
        AIOKafkaProducer(api_version="0.10.2")
    with pytest.raises(ConfigError, match="linger"):  # a typo gets a suggestion at start()
        run(producer(LiveMockClient(), lingr_ms=1).start())


def test_send_returns_a_future_of_the_record_metadata_and_stop_leaves_no_thread() -> None:
    client = LiveMockClient(partitions=1)
    before = set(threading.enumerate())

    async def main() -> None:
        async with producer(client) as p:
            first = await p.send_and_wait("t", b"a", key=b"k")
            future = await p.send("t", b"b")
            second = await future
            assert (first.offset, second.offset, first.topic) == (0, 1, "t")
            assert await p.partitions_for("t") == {0}

    run(main())
    assert [r.value for r in client.records[("t", 0)]] == [b"a", b"b"]
    assert set(threading.enumerate()) <= before


def test_send_before_start_and_after_stop_is_refused() -> None:
    async def main() -> None:
        p = producer(LiveMockClient())
        with pytest.raises(IllegalStateError, match="not started"):
            await p.send("t", b"x")
        await p.start()
        await p.stop()
        with pytest.raises(IllegalStateError, match="stopped"):
            await p.send("t", b"x")
        await p.stop()  # again: nothing

    run(main())


def test_stop_delivers_what_was_sent() -> None:
    client = LiveMockClient(partitions=1)

    async def main() -> list[asyncio.Future[Any]]:
        p = producer(client, linger_ms=60_000)
        await p.start()
        futures = [await p.send("t", b"%d" % i) for i in range(100)]
        await p.stop()
        return futures

    futures = run(main())
    assert [f.result().offset for f in futures] == list(range(100))


def test_a_send_cancelled_while_waiting_for_metadata_queues_nothing() -> None:
    client = LiveMockClient(partitions=1)

    async def main() -> None:
        async with producer(client) as p:
            waiting = asyncio.ensure_future(p.send("unknown", b"never"))
            await asyncio.sleep(0.05)
            assert not waiting.done()  # awaiting the topic's metadata, the loop runs on
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            client.prepare_metadata_update(metadata_update_with(1, {"t": 1, "unknown": 1}))
            await p.send_and_wait("unknown", b"later")

    run(main())
    assert [r.value for r in client.records[("unknown", 0)]] == [b"later"]


def test_metadata_and_buffer_waits_end_at_max_block_ms_with_typed_errors() -> None:
    client = LiveMockClient(partitions=1)

    async def main() -> None:
        async with producer(client, max_block_ms=100, buffer_memory=4096, max_batch_size=1024) as p:
            with pytest.raises(KafkaTimeoutError, match="max_block_ms") as exc_info:
                await p.send("unknown", b"x")
            assert not isinstance(exc_info.value, BufferExhaustedError)
            client.hold = True  # nothing is acknowledged: the buffer fills up
            with pytest.raises(BufferExhaustedError, match="buffer.memory"):
                for _ in range(100):
                    await p.send("t", b"x" * 1000)
            client.hold = False
            client.release()

    run(main())
