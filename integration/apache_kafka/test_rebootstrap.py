"""KIP-899 on Apache Kafka 4.4: the cluster behind the producer's ``bootstrap.servers`` is
replaced (a load balancer's address, here a TCP forwarder we switch, now leads to another
cluster) and every broker the producer knew is gone. With ``metadata.recovery.strategy``
at its default (``rebootstrap``) the producer starts again from ``bootstrap.servers`` and
its records reach the new cluster."""

from __future__ import annotations

import selectors
import socket
import threading
from types import TracebackType

import pytest

from integration.apache_kafka.readback import confluent_read, unique
from kclient import KafkaProducer
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka

LOOPBACK = "127.0.0.1"


class SwitchableForwarder:
    """A TCP forwarder on 127.0.0.1 (what a load balancer in front of ``bootstrap.servers``
    is): each new connection goes to ``target`` as it is at that moment. One thread, which
    ``close`` stops; connections already made keep their first target."""

    def __init__(self, target: int) -> None:
        self.target = target
        self._listener = socket.create_server((LOOPBACK, 0))
        self._listener.setblocking(False)
        self.port = int(self._listener.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._peer: dict[socket.socket, socket.socket] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="forwarder", daemon=True)
        self._thread.start()

    def __enter__(self) -> SwitchableForwarder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                else:
                    self._forward(sock)

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        try:
            upstream = socket.create_connection((LOOPBACK, self.target), timeout=5)
        except OSError:
            client.close()  # the target is down: the client sees the connection closed
            return
        self._peer[client], self._peer[upstream] = upstream, client
        for sock in (client, upstream):
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        peer = self._peer.get(sock)
        if not data or peer is None:
            self._drop(sock)
            return
        try:
            peer.setblocking(True)
            peer.sendall(data)
            peer.setblocking(False)
        except OSError:
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        for one in (sock, self._peer.pop(sock, None)):
            if one is None:
                continue
            self._peer.pop(one, None)
            try:
                self._selector.unregister(one)
            except (KeyError, ValueError):
                pass
            one.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in list(self._peer):
            self._drop(sock)
        self._selector.close()
        self._listener.close()


def _plaintext_port(kafka: ApacheKafka) -> int:
    return int(kafka.broker_address(1).rsplit(":", 1)[1])


@pytest.mark.parametrize("apache_kafka", [VERSIONS[0]], indirect=True)
def test_a_cluster_replaced_behind_the_bootstrap_address_is_found_again(
    apache_kafka: ApacheKafka,
) -> None:
    """(With ``metadata.recovery.strategy=none`` the same run fails the second record
    after ``delivery.timeout.ms``: checked by hand on 2026-11-29; the unit tests keep
    ``none``'s behaviour, and this test saves a second cluster's start.)"""
    new = apache_kafka
    topic = unique("rebootstrap")
    new.create_topic(topic, 1)
    with ApacheKafka(VERSIONS[0]) as old, SwitchableForwarder(_plaintext_port(old)) as lb:
        old.create_topic(topic, 1)
        settings = {
            "bootstrap.servers": f"{LOOPBACK}:{lb.port}",
            "delivery.timeout.ms": 10_000,
            "request.timeout.ms": 3_000,
        }
        with KafkaProducer(settings) as producer:
            assert producer.send(topic, b"to the old cluster").result(timeout=30).offset == 0
            lb.target = _plaintext_port(new)
            old.close()  # every broker the producer knew is gone
            future = producer.send(topic, b"to the new cluster")
            assert future.result(timeout=40).offset == 0
    read = confluent_read(new, {topic: (1, 1)})
    assert [value for _, value, _, _ in read[topic][0]] == [b"to the new cluster"]
