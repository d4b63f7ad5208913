"""``connection.failed.authentication.delay.ms``: the answer to a failed authentication is
held back (and the connection closed only then), so guessing passwords is slow, while the
Processor keeps serving every other connection. First one Processor over socket pairs with
a fake clock (deterministic), then a real SASL broker on 127.0.0.1."""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.broker.config import BrokerConfig
from kclient.broker.metrics import BrokerMetrics
from kclient.broker.request_channel import RequestChannel
from kclient.broker.sasl_server import SaslServer
from kclient.broker.socket_server import Processor
from kclient.errors import ConfigError
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request

DELAY_MS = 500
GOOD, BAD = b"\x00alice\x00right", b"\x00alice\x00wrong"


class FakeTime:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


class Client:
    """One blocking client connection speaking SaslHandshake / SaslAuthenticate."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(10)
        self._correlation = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self._correlation += 1
        frame = encode_request(api_key, version, self._correlation, "delay-test", body)
        self.sock.sendall(b"".join(frame))

    def answer(self, api_key: int, version: int) -> dict[str, Any]:
        (size,) = struct.unpack(">i", self._exactly(4))
        correlation, body = decode_response(api_key, version, self._exactly(size))
        assert correlation == self._correlation
        return body

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api_key, version, body)
        return self.answer(api_key, version)

    def waiting(self) -> bool:
        """Nothing has arrived (and the connection is not closed)."""
        return not select.select([self.sock], [], [], 0)[0]

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data


def login(client: Client, token: bytes) -> dict[str, Any]:
    handshake = client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake["error_code"] == 0
    return client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})


# ---- one Processor, fake time ------------------------------------------------------------


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def processor(fake_time: FakeTime) -> Iterator[Processor]:
    server = SaslServer(
        ["PLAIN"], {"alice": "right"}, failed_authentication_delay_ms=DELAY_MS, iterations=4096
    )
    channel = RequestChannel(10, BrokerMetrics(0, 0))
    p = Processor(
        0,
        channel,
        max_request_bytes=1 << 20,
        monotonic_ns=fake_time,
        sasl_server=server,
    )
    yield p
    p.close()


@pytest.fixture
def connect(processor: Processor) -> Iterator[Callable[[], Client]]:
    sockets: list[socket.socket] = []

    def make() -> Client:
        ours, theirs = socket.socketpair()
        assert processor.accept(ours, may_block=False)
        processor.configure_new_connections()
        sockets.append(theirs)
        return Client(theirs)

    yield make
    for sock in sockets:
        sock.close()


def serve(processor: Processor, rounds: int = 10) -> None:
    for _ in range(rounds):
        processor.run_once(0.0)


def test_a_failed_authentication_is_answered_after_the_delay_while_others_are_served(
    processor: Processor, fake_time: FakeTime, connect: Callable[[], Client]
) -> None:
    guesser = connect()
    guesser.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    serve(processor)
    assert guesser.answer(ApiKey.SASL_HANDSHAKE, 1)["error_code"] == 0
    guesser.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": BAD})
    serve(processor)
    assert guesser.waiting()
    # meanwhile the same Processor serves another client at once
    user = connect()
    user.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    serve(processor)
    assert user.answer(ApiKey.SASL_HANDSHAKE, 1)["error_code"] == 0
    user.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": GOOD})
    serve(processor)
    assert user.answer(ApiKey.SASL_AUTHENTICATE, 2)["error_code"] == 0
    fake_time.ns += (DELAY_MS - 1) * 1_000_000
    serve(processor)
    assert guesser.waiting()  # 1 ms early
    fake_time.ns += 1_000_000
    serve(processor)
    refused = guesser.answer(ApiKey.SASL_AUTHENTICATE, 2)
    assert refused["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
    serve(processor)
    assert guesser.closed()
    assert processor.connection_count == 1  # the user's connection is still open


def test_a_guesser_that_leaves_before_its_answer_costs_nothing(
    processor: Processor, fake_time: FakeTime, connect: Callable[[], Client]
) -> None:
    guesser = connect()
    guesser.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    serve(processor)
    guesser.answer(ApiKey.SASL_HANDSHAKE, 1)
    guesser.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": BAD})
    serve(processor)
    guesser.sock.close()
    fake_time.ns += DELAY_MS * 1_000_000
    serve(processor)
    assert processor.connection_count == 0


# ---- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, 600_000, "100", True])
def test_a_bad_delay_names_the_setting(value: object) -> None:
    with pytest.raises(ConfigError, match="'connection.failed.authentication.delay.ms' must be"):
        BrokerConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_users={"a": "b"},
            connection_failed_authentication_delay_ms=value,  # type: ignore[arg-type]
        )


def test_a_delay_without_sasl_is_refused() -> None:
    with pytest.raises(ConfigError, match="'connection.failed.authentication.delay.ms' is set"):
        BrokerConfig(connection_failed_authentication_delay_ms=5)


# ---- a real broker -----------------------------------------------------------------------


def test_guesses_on_one_connection_at_a_time_take_the_delay_each_while_a_user_produces() -> None:
    attempts = 5
    delay_ms = 200
    with EmbeddedBroker(
        security_protocol="SASL_PLAINTEXT",
        sasl_users={"alice": "right"},
        num_network_threads=1,  # the guesses and the producer share one Processor
        connection_failed_authentication_delay_ms=delay_ms,
    ) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="alice",
            sasl_password="right",
        )
        stop = threading.Event()
        acked: list[int] = []

        def produce() -> None:
            while not stop.is_set():
                acked.append(producer.send("delay", b"v").get(timeout=30).offset)

        try:
            producer.send("delay", b"first").get(timeout=30)  # connected and authenticated
            user = threading.Thread(target=produce, name="user")
            user.start()
            began = time.monotonic()
            answered: list[float] = []
            for _ in range(attempts):
                with socket.create_connection((host, int(port)), timeout=10) as sock:
                    guesser = Client(sock)
                    start = time.monotonic()
                    assert login(guesser, BAD)["error_code"] == 58
                    answered.append(time.monotonic() - start)
                    assert guesser.closed()
            elapsed = time.monotonic() - began
            acked_during = len(acked)
            stop.set()
            user.join(timeout=30)
        finally:
            stop.set()
            producer.close()
    assert min(answered) >= delay_ms / 1000
    assert elapsed >= attempts * delay_ms / 1000
    assert acked_during >= attempts  # the user kept producing all along


def test_the_cli_flag_reaches_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    from kclient.broker.__main__ import main

    flags = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-user", "a:b"]
    assert main([*flags, "--connection-failed-authentication-delay-ms", "-1"]) == 2
    assert "'connection.failed.authentication.delay.ms' must be" in capsys.readouterr().err
