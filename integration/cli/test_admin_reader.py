"""The CLI's blocking reader against tansu, with records written by confluent-kafka, and its
connection against a peer that never answers."""

import gc
import socket
from collections.abc import Iterator

import confluent_kafka
import pytest

from integration.peers import Tansu, run_tansu
from kclient import errors
from kclient.cli.admin import BlockingConnection, ClusterReader


@pytest.fixture(scope="module")
def tansu() -> Iterator[Tansu]:
    with run_tansu() as broker:
        yield broker


def test_reads_back_what_an_independent_producer_wrote(tansu: Tansu) -> None:
    tansu.create_topic("admin-read", partitions=2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": tansu.bootstrap_servers, "linger.ms": 5}
    )
    sent: dict[int, list[tuple[bytes, bytes]]] = {0: [], 1: []}
    for i in range(500):
        part = i % 2
        key, value = f"k{i}".encode(), f"value-{i}".encode() * 3
        producer.produce("admin-read", value=value, key=key, partition=part)
        sent[part].append((key, value))
    assert producer.flush(30) == 0

    reader = ClusterReader(tansu.bootstrap_servers)
    try:
        starts = reader.end_offsets("admin-read", timestamp=-2)
        for part in (0, 1):
            got = [
                (r.key, r.value)
                for r in reader.read("admin-read", part, starts[part], starts[part] + 250)
            ]
            assert got == sent[part]
    finally:
        reader.close()


def test_creating_an_existing_topic_reports_false(tansu: Tansu) -> None:
    reader = ClusterReader(tansu.bootstrap_servers)
    try:
        assert reader.create_topic("admin-created", 3) is True
        assert reader.create_topic("admin-created", 3) is False
        assert sorted(reader.leaders("admin-created")) == [0, 1, 2]
    finally:
        reader.close()


def test_unreachable_bootstrap_names_the_address() -> None:
    from integration.peers import free_port

    port = free_port()
    with pytest.raises(errors.KafkaConnectionError, match=f"127.0.0.1:{port}"):
        ClusterReader(f"127.0.0.1:{port}")


def test_a_peer_that_never_answers_fails_the_connection_and_closes_its_socket() -> None:
    """A port that accepts and never answers ApiVersions (not a broker, or a broker stuck):
    the connection fails after its timeout, naming the address, and leaves no socket open
    (an unclosed one is an error here: warnings are errors)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        host, port = silent.getsockname()[:2]
        with pytest.raises(errors.KafkaError):
            BlockingConnection(host, port, timeout_s=0.3)
        gc.collect()  # an unclosed socket's ResourceWarning is raised here
