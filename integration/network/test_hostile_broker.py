"""A producer against a broken or hostile broker (``kclient.testing.fake_broker`` on
127.0.0.1): a response over ``receive.message.max.bytes`` closes the connection with an
error naming the setting, and what the producer allocates follows the bytes that arrive,
not the sizes a broker announces."""

from __future__ import annotations

import struct
import threading
import tracemalloc
from typing import Any

import pytest

from kclient import KafkaProducer
from kclient.errors import KafkaTimeoutError, ProtocolDecodeError
from kclient.protocol import ApiKey
from kclient.protocol.frame import RequestHeader
from kclient.testing.fake_broker import FakeBroker, metadata_body


def producer(bootstrap: str, **settings: Any) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, **settings)


def test_a_metadata_answer_over_the_limit_fails_sends_naming_the_setting() -> None:
    answers: dict[int, Any] = {}
    with FakeBroker(answers) as fake:
        body = metadata_body([fake], {"t": 2000})  # about 60 KB
        answers[ApiKey.METADATA] = lambda header, request: body
        small = producer(
            fake.bootstrap_servers, receive_message_max_bytes=10_000, max_block_ms=2000
        )
        try:
            with pytest.raises(KafkaTimeoutError) as failed:
                small.send("t", b"v").get(timeout=30)
        finally:
            small.close()
        assert "more than 'receive.message.max.bytes' (10000)" in str(failed.value)
        assert isinstance(failed.value.__cause__, ProtocolDecodeError)
        enough = producer(fake.bootstrap_servers, receive_message_max_bytes=1_000_000)
        try:
            assert enough.send("t", b"v", partition=1999).get(timeout=30).partition == 1999
        finally:
            enough.close()


def test_an_announced_frame_that_never_comes_costs_only_what_arrived() -> None:
    """A broker announces 90 MB, sends 64 KB and stalls: the producer holds what arrived
    (Python's allocations traced meanwhile), and the request times out as any
    unanswered one does."""
    stalled = threading.Event()
    answers: dict[int, Any] = {}

    def stall(header: RequestHeader, body: dict[str, Any]) -> bytes:
        stalled.set()
        head = struct.pack(">ii", 90_000_000, header.correlation_id)
        return head + bytes(65_536)

    with FakeBroker(answers) as fake:
        answers[ApiKey.METADATA] = stall
        tracemalloc.start()
        try:
            hostile = producer(fake.bootstrap_servers, max_block_ms=1500, request_timeout_ms=1000)
            try:
                with pytest.raises(KafkaTimeoutError):
                    hostile.send("t", b"v").get(timeout=30)
            finally:
                hostile.close()
            _, peak_bytes = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert stalled.is_set()
    assert peak_bytes < 16_000_000  # not the 90 MB announced
