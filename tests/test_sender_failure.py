"""A bug that kills the producer's I/O thread: the records in flight fail with it, and
every later call says that the sender thread failed and why (not a metadata or timeout
error that hides the cause)."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.errors import KafkaError
from kclient.network.kafka_client import ClientResponse
from kclient.producer import KafkaProducer
from tests.test_producer import LiveMockClient


class FailingClient(LiveMockClient):
    """Raises from ``poll`` once ``broken`` is set, as a bug in the I/O path would."""

    broken = False

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        if self.broken:
            raise RuntimeError("a bug in the I/O path")
        return super().poll(timeout_ms, now_ms)


def test_a_failed_io_thread_fails_pending_records_and_later_calls_with_its_cause() -> None:
    client = FailingClient()
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, linger_ms=60_000, max_block_ms=5_000
    ) as producer:
        pending = producer.send("t", b"lingering", partition=0)
        client.hold = True
        client.broken = True
        client.wakeup()
        with pytest.raises(KafkaError, match="sender thread failed: RuntimeError") as first:
            pending.result(10)
        waiting: Any = None
        with pytest.raises(KafkaError, match="sender thread failed: RuntimeError") as later:
            waiting = producer.send("unknown-topic", b"x")  # would wait for its metadata
        assert waiting is None
        assert isinstance(first.value.__cause__, RuntimeError)
        assert "close it" in str(later.value)
        with pytest.raises(KafkaError, match="sender thread failed"):
            producer.send("t", b"y", partition=0)  # the common case too
