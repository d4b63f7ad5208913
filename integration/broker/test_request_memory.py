"""What a request can make the broker allocate: a size prefix costs 4 KiB, not what it
announces; past ``queued.max.request.bytes`` only small requests are read until answers go
out (Processor over socket pairs, and a whole broker)."""

from __future__ import annotations

import socket
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest

from kclient.broker import EmbeddedBroker
from kclient.broker.metrics import BrokerMetrics
from kclient.broker.network_receive import FIRST_CHUNK_BYTES, MemoryPool
from kclient.broker.request_channel import Request, RequestChannel, SendResponse
from kclient.broker.socket_server import Processor
from kclient.protocol import ApiKey
from kclient.protocol.frame import encode_request, encode_response
from kclient.testing.hostile import produce_request

MIB = 1 << 20


@pytest.fixture
def channel() -> RequestChannel:
    return RequestChannel(10, BrokerMetrics(0, 0))


@pytest.fixture
def pool() -> MemoryPool:
    return MemoryPool(16 * 1024)


@pytest.fixture
def processor(channel: RequestChannel, pool: MemoryPool) -> Iterator[Processor]:
    p = Processor(0, channel, max_request_bytes=MIB, memory_pool=pool)
    yield p
    p.close()


@pytest.fixture
def connect(processor: Processor) -> Iterator[Callable[[], socket.socket]]:
    clients: list[socket.socket] = []

    def make() -> socket.socket:
        ours, theirs = socket.socketpair()
        assert processor.accept(ours, may_block=False)
        processor.configure_new_connections()
        theirs.settimeout(5)
        clients.append(theirs)
        return theirs

    yield make
    for c in clients:
        c.close()


def metadata(corr: int, topics: int) -> bytes:
    """A Metadata request of about ``topics`` * 100 bytes."""
    body = {"topics": [{"name": f"t{i:097d}"} for i in range(topics)]}
    return b"".join(encode_request(ApiKey.METADATA, 4, corr, "c", body))


def pump(processor: Processor, until: Callable[[], object], rounds: int = 100) -> None:
    for _ in range(rounds):
        processor.run_once(0.01)
        if until():
            return
    raise AssertionError("condition not reached")


def queued(channel: RequestChannel) -> list[int]:
    out = []
    while (request := channel.receive_request(0.001)) is not None:
        assert isinstance(request, Request)
        out.append(request.header.correlation_id)
        queued_requests.append(request)
    return out


queued_requests: list[Request] = []


def answer(channel: RequestChannel, corr: int) -> None:
    request = next(r for r in queued_requests if r.header.correlation_id == corr)
    buffers = encode_response(ApiKey.METADATA, 4, corr, {"brokers": [], "topics": []})
    channel.send_response(SendResponse(request, buffers))


def test_past_the_pool_small_requests_are_read_and_large_ones_wait_for_answers(
    processor: Processor,
    channel: RequestChannel,
    pool: MemoryPool,
    connect: Callable[[], socket.socket],
) -> None:
    queued_requests.clear()
    first, second, small = connect(), connect(), connect()
    first.sendall(metadata(1, 300))  # 30 KiB: past the 16 KiB pool, on its overdraft
    pump(processor, lambda: pool.used_bytes >= 30_000)
    second.sendall(metadata(2, 200))  # 20 KiB: waits for room
    small.sendall(metadata(3, 10))  # 1 KiB: read at once
    got: list[int] = []
    pump(processor, lambda: got.extend(queued(channel)) or sorted(got) == [1, 3])
    for _ in range(10):
        processor.run_once(0.01)
    got.extend(queued(channel))
    assert sorted(got) == [1, 3]  # the second request waits
    assert pool.used_bytes >= pool.size_bytes
    answer(channel, 1)
    answer(channel, 3)
    pump(processor, lambda: got.extend(queued(channel)) or 2 in got)
    first.recv(65536)
    answer(channel, 2)
    pump(processor, lambda: pool.used_bytes == 0)


def test_a_closed_connection_gives_back_its_bytes(
    processor: Processor, pool: MemoryPool, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    client.sendall(metadata(1, 300)[:20_000])
    pump(processor, lambda: pool.used_bytes >= 20_000)
    client.close()
    pump(processor, lambda: pool.used_bytes == 0 and processor.connection_count == 0)


def test_size_prefixes_of_100_mib_then_silence_cost_4_kib_each() -> None:
    """The issue's case: 8 connections announcing 100 MiB each made the broker allocate
    ~840 MB at once. Now each holds its first 4 KiB, and a producer is served meanwhile."""
    with EmbeddedBroker() as broker:
        broker.create_topic("alive", 1)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("alive", b"warm-up")
        assert producer.flush(10) == 0
        tracemalloc.start()
        attackers: list[socket.socket] = []
        try:
            before, _ = tracemalloc.get_traced_memory()
            for _ in range(8):
                sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
                sock.sendall(struct.pack(">i", 100 * MIB) + b"\x00\x03")
                attackers.append(sock)
            deadline = time.monotonic() + 5
            while broker.metrics()[0].connections < 9 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)  # the Processors have read the prefixes
            producer.produce("alive", b"still served")
            assert producer.flush(10) == 0
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            for sock in attackers:
                sock.close()
        assert peak - before < 8 * FIRST_CHUNK_BYTES + 4 * MIB, peak - before
        assert broker.high_watermark("alive") == 2


def send_while_pumping(
    processor: Processor, sock: socket.socket, data: bytes, until: Callable[[], object]
) -> None:
    """Send ``data`` a socket buffer at a time, running the processor between sends."""
    sock.setblocking(False)
    view = memoryview(data)
    for _ in range(10_000):
        if view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                pass
        processor.run_once(0.001)
        if until():
            return
    raise AssertionError("condition not reached")


def test_a_request_of_more_entries_than_max_request_items_is_refused_before_decoding(
    channel: RequestChannel, caplog: pytest.LogCaptureFixture
) -> None:
    """1,000,000 partition entries in a 6 MB Produce request used to become ~1 GB of
    Python objects; past max.request.items the connection is closed having decoded at
    most that many, and the log names the setting."""
    p = Processor(0, channel, max_request_bytes=100 * MIB, max_request_items=1000)
    try:
        ours, theirs = socket.socketpair()
        assert p.accept(ours, may_block=False)
        p.configure_new_connections()
        frame = produce_request("t", None, 1_000_000)
        tracemalloc.start()
        try:
            send_while_pumping(p, theirs, frame, lambda: p.connection_count == 0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert channel.receive_request(0.001) is None  # nothing reached the handlers
        assert peak < 3 * len(frame)  # the frame itself, not its entries as objects
        assert "max.request.items" in caplog.text
        theirs.close()
    finally:
        p.close()


def test_a_request_within_max_request_items_is_served(channel: RequestChannel) -> None:
    p = Processor(0, channel, max_request_bytes=100 * MIB, max_request_items=1001)
    try:
        ours, theirs = socket.socketpair()
        assert p.accept(ours, may_block=False)
        p.configure_new_connections()
        request: list[object] = []
        send_while_pumping(  # 1 topic + 1000 partitions
            p,
            theirs,
            produce_request("t", None, 1000),
            lambda: request.append(channel.receive_request(0.001)) or request[-1] is not None,
        )
        assert isinstance(request[-1], Request)
        assert len(request[-1].body["topic_data"][0]["partition_data"]) == 1000
        theirs.close()
    finally:
        p.close()
