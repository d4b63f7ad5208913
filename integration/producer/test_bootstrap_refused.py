"""Every bootstrap address refusing connections, over real sockets on 127.0.0.1 (issue
31, item 3): ``send`` and ``kclient.aio``'s ``start()`` fail after
``bootstrap.refused.timeout.ms`` (2 s) with ``BootstrapRefusedError`` naming each address,
instead of waiting ``max.block.ms`` (60 s) / ``request.timeout.ms`` (30 s), and the
repeated connection warnings are rate-limited (before: about 2.5 lines a second)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from integration.peers import free_port
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.errors import KafkaConnectionError, KafkaTimeoutError
from kclient.network.bootstrap_refusals import BootstrapRefusedError


def test_send_fails_fast_naming_every_refusing_address(caplog: pytest.LogCaptureFixture) -> None:
    ports = [free_port(), free_port()]  # nothing listens there: refused
    servers = ",".join(f"127.0.0.1:{p}" for p in ports)
    producer = KafkaProducer({"bootstrap.servers": servers})
    try:
        start = time.monotonic()
        with (
            caplog.at_level(logging.WARNING, logger="kclient"),
            pytest.raises(BootstrapRefusedError) as info,
        ):
            producer.send("orders", b"v")
        took_s = time.monotonic() - start
    finally:
        producer.close()
    assert 1.9 <= took_s < 5  # bootstrap.refused.timeout.ms, not max.block.ms
    assert isinstance(info.value, KafkaTimeoutError)
    for port in ports:
        assert f"127.0.0.1:{port}: connection refused" in str(info.value)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= len(ports), [r.getMessage() for r in warnings]


def test_minus_one_waits_max_block_ms_as_java_does() -> None:
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        bootstrap_refused_timeout_ms=-1,
        max_block_ms=3_000,
    )
    try:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="no broker reachable after 3 s") as info:
            producer.send("orders", b"v")
        assert time.monotonic() - start >= 2.9
        assert not isinstance(info.value, BootstrapRefusedError)
    finally:
        producer.close()


def test_aio_start_fails_fast_when_every_bootstrap_address_refuses() -> None:
    port = free_port()

    async def main() -> float:
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}: connection refused"):
            await producer.start()
        return time.monotonic() - start

    took_s = asyncio.run(main())
    assert took_s < 5  # before: request_timeout_ms (30 s)


def test_a_broker_that_comes_up_within_the_setting_is_found() -> None:
    port = free_port()

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}", bootstrap_refused_timeout_ms=10_000
        )
        starting = asyncio.create_task(producer.start())
        await asyncio.sleep(1.0)  # refused meanwhile
        assert not starting.done()
        with EmbeddedBroker(port=port) as broker:
            broker.create_topic("t", 1)
            await asyncio.wait_for(starting, 10)
            try:
                await producer.send_and_wait("t", b"v")
            finally:
                await producer.stop()

    asyncio.run(main())
