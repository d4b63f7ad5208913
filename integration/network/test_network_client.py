"""NetworkClient over loopback against kclient's embedded broker and against tansu."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from integration.network.brokers import Broker, RestartableTansu
from integration.peers import free_port
from kclient.broker import EmbeddedCluster
from kclient.clock import SYSTEM_CLOCK as CLOCK
from kclient.errors import KafkaTimeoutError, ProtocolDecodeError
from kclient.network import ClientRequest, ClientResponse, NetworkClient, NetworkClientConfig
from kclient.network.connection_states import Address, Resolver, resolve_all
from kclient.network.utils import await_metadata, await_ready, send_and_receive
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey

TIMEOUT_MS = 15_000


@pytest.fixture
def clients() -> Iterator[Callable[..., NetworkClient]]:
    made: list[NetworkClient] = []

    def make(bootstrap: str, resolver: Resolver = resolve_all, **config: int) -> NetworkClient:
        client = NetworkClient.create(
            bootstrap,
            NetworkClientConfig(**config),  # type: ignore[arg-type]
            clock=CLOCK,
            resolver=resolver,
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def metadata_request(node_id: int, topic: str, done: list[ClientResponse]) -> ClientRequest:
    return ClientRequest(
        node_id,
        ApiKey.METADATA,
        {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
        CLOCK.monotonic_ms(),
        callback=done.append,
    )


def long_poll_fetch(
    node_id: int, topic: str, partition: int, done: list[ClientResponse]
) -> ClientRequest:
    """A Fetch the broker holds for 20 s (empty partition, min_bytes 1): surely in flight."""
    return ClientRequest(
        node_id,
        ApiKey.FETCH,
        {
            "max_wait_ms": 20_000,
            "min_bytes": 1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
        CLOCK.monotonic_ms(),
        callback=done.append,
        max_version=12,  # topics by name
    )


def poll_until(client: NetworkClient, done: Callable[[], bool], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        client.poll(50, CLOCK.monotonic_ms())


def test_connect_negotiate_and_fetch_metadata(
    broker: Broker, clients: Callable[..., NetworkClient]
) -> None:
    broker.create_topic("orders", 3)
    client = clients(broker.bootstrap_servers)
    client.metadata.add("orders", CLOCK.monotonic_ms())
    cluster = await_metadata(
        client, CLOCK, TIMEOUT_MS, until=lambda c: c.partition_count_for_topic("orders") == 3
    )
    assert all(p.leader is not None for p in cluster.partitions_for_topic("orders"))
    node = cluster.nodes[0]
    await_ready(client, node, CLOCK, TIMEOUT_MS)
    versions = client.api_versions(node.id)
    assert versions is not None
    chosen = versions.latest_usable_version(ApiKey.PRODUCE)
    low, high = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
    assert low <= chosen <= high
    assert chosen == min(high, versions.versions[ApiKey.PRODUCE][1])


def test_pipelined_requests_on_one_connection_complete_in_order(
    broker: Broker, clients: Callable[..., NetworkClient]
) -> None:
    broker.create_topic("pipelined", 1)
    client = clients(broker.bootstrap_servers)
    node = await_metadata(client, CLOCK, TIMEOUT_MS).nodes[0]
    await_ready(client, node, CLOCK, TIMEOUT_MS)
    done: list[ClientResponse] = []
    sent: list[ClientRequest] = []
    while len(sent) < 20:
        if client.ready(node, CLOCK.monotonic_ms()):
            sent.append(metadata_request(node.id, "pipelined", done))
            client.send(sent[-1], CLOCK.monotonic_ms())
        client.poll(0 if len(sent) < 20 else 50, CLOCK.monotonic_ms())
    poll_until(client, lambda: len(done) == len(sent))
    assert [r.request for r in done] == sent
    assert all(r.body is not None and not r.disconnected for r in done)
    assert [r.correlation_id for r in done] == sorted(r.correlation_id for r in done)


def test_requests_to_every_broker_of_a_cluster_run_concurrently(
    clients: Callable[..., NetworkClient],
) -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("spread", 6)
        client = clients(cluster.bootstrap_servers)
        nodes = await_metadata(client, CLOCK, TIMEOUT_MS, until=lambda c: len(c.nodes) == 3).nodes
        for node in nodes:
            await_ready(client, node, CLOCK, TIMEOUT_MS)
        done: list[ClientResponse] = []
        for node in nodes:
            client.send(metadata_request(node.id, "spread", done), CLOCK.monotonic_ms())
        assert client.in_flight_request_count() == 3
        poll_until(client, lambda: len(done) == 3)
        assert sorted(r.destination for r in done) == sorted(n.id for n in nodes)
        assert all(r.body is not None for r in done)


def test_a_stopped_broker_fails_in_flight_requests_then_the_client_recovers(
    clients: Callable[..., NetworkClient],
) -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", 3)
        client = clients(cluster.bootstrap_servers)
        client.metadata.add("t", CLOCK.monotonic_ms())
        before = await_metadata(
            client, CLOCK, TIMEOUT_MS, until=lambda c: c.partition_count_for_topic("t") == 3
        )
        led = [
            p.partition for p in before.partitions_for_topic("t") if p.leader and p.leader.id == 1
        ]
        assert led
        nodes = before.nodes
        victim = next(n for n in nodes if n.id == 1)
        await_ready(client, victim, CLOCK, TIMEOUT_MS)
        done: list[ClientResponse] = []
        client.send(long_poll_fetch(victim.id, "t", led[0], done), CLOCK.monotonic_ms())
        client.poll(100, CLOCK.monotonic_ms())  # the broker now holds the fetch
        assert not done
        cluster.stop_broker(1)
        poll_until(client, lambda: bool(done))
        assert done[0].disconnected and done[0].error is not None
        # The disconnect triggers a metadata refresh that shows the new leaders.
        moved = await_metadata(
            client,
            CLOCK,
            TIMEOUT_MS,
            until=lambda c: (
                c.partition_count_for_topic("t") == 3
                and all(
                    p.leader is not None and p.leader.id != 1 for p in c.partitions_for_topic("t")
                )
            ),
        )
        assert {p.leader.id for p in moved.partitions_for_topic("t") if p.leader} <= {0, 2}

        # While it is down: attempts are refused and back off (no busy reconnect loop).
        down_until = time.monotonic() + 1.5
        while time.monotonic() < down_until:
            client.ready(victim, CLOCK.monotonic_ms())
            client.poll(20, CLOCK.monotonic_ms())
        failed_attempts = client.connection_states.node_state(1).failed_attempts
        assert 2 <= failed_attempts <= 10
        assert any("connection refused" in why for why in client.connection_failures().values())

        cluster.start_broker(1)
        await_ready(client, victim, CLOCK, TIMEOUT_MS)
        response = send_and_receive(client, metadata_request(victim.id, "t", []), CLOCK)
        assert response.body is not None and not response.disconnected


def test_a_killed_tansu_fails_in_flight_requests_then_the_client_recovers(
    restartable_tansu: RestartableTansu, clients: Callable[..., NetworkClient]
) -> None:
    client = clients(restartable_tansu.bootstrap_servers, reconnect_backoff_max_ms=200)
    node = await_metadata(client, CLOCK, TIMEOUT_MS).nodes[0]
    await_ready(client, node, CLOCK, TIMEOUT_MS)
    done: list[ClientResponse] = []
    restartable_tansu.stop()  # before the send, so tansu cannot answer it first
    client.send(metadata_request(node.id, "t", done), CLOCK.monotonic_ms())  # still "ready"
    poll_until(client, lambda: bool(done))
    assert done[0].disconnected
    assert not client.ready(node, CLOCK.monotonic_ms())
    restartable_tansu.start()
    await_ready(client, node, CLOCK, TIMEOUT_MS)
    response = send_and_receive(client, metadata_request(node.id, "t", []), CLOCK)
    assert response.body is not None


def _no_invalid(host: str, port: int) -> list[Address]:
    """``*.invalid`` does not exist, without asking a DNS server off this machine."""
    if host.endswith(".invalid"):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return resolve_all(host, port)


def test_an_unreachable_bootstrap_fails_at_the_deadline_naming_every_address(
    clients: Callable[..., NetworkClient], caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    with caplog.at_level(logging.WARNING, logger="kclient"):
        client = clients(f"127.0.0.1:{port},nonexistent-host.invalid:9092", _no_invalid)
    # a name that does not resolve is left out when the client is created, as Java's
    # bootstrap.resolve.timeout.ms=0 does: a warning then, not an address tried
    assert "leaving nonexistent-host.invalid:9092 out of 'bootstrap.servers'" in caplog.text
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as failure:
        await_metadata(client, CLOCK, 2_000)
    assert time.monotonic() - started < 10
    text = str(failure.value)
    assert "no broker reachable after 2" in text
    assert f"127.0.0.1:{port}: connection refused" in text


@pytest.fixture
def http_port() -> Iterator[int]:
    """A service that answers anything with an HTTP error (not Kafka)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        conns = []
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            try:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            conns.append(conn)
        for conn in conns:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_a_non_kafka_service_gives_a_protocol_error_not_a_hang(
    http_port: int, clients: Callable[..., NetworkClient]
) -> None:
    client = clients(f"127.0.0.1:{http_port}")
    started = time.monotonic()
    poll_until(client, lambda: bool(client.connection_failures()), timeout_s=5)
    assert time.monotonic() - started < 5
    [reason] = client.connection_failures().values()
    assert "Kafka listener" in reason
    with pytest.raises(KafkaTimeoutError, match="Kafka listener") as timed_out:
        await_metadata(client, CLOCK, 500)
    assert isinstance(timed_out.value.__cause__, ProtocolDecodeError)  # typed, for callers
