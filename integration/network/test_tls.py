"""KSelector over TLS against a TLS server built on Python's ssl module (OpenSSL).

The server thread speaks just enough: size-prefixed frames, each answered with the same
bytes reversed. This checks our non-blocking handshake, chunked writes, reads of data
the TLS layer buffered, mutual TLS, and the errors a user gets for the usual mistakes.
Kafka-level TLS (produce and read back) is tested against the embedded broker's SSL
listener in ``integration/producer/test_tls_produce.py``.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

from kclient.clock import SYSTEM_CLOCK
from kclient.network.selector import KSelector, NetworkSend
from kclient.testing.tls import TestCertificates, write_test_certificates
from kclient.tls import client_context

NODE = 1


class FrameServer:
    """Accepts connections (TLS unless ``context`` is None); answers each frame reversed."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.context = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)  # so that the accept loop sees ``close``
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self.peer_subjects: list[object] = []
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(raw,), daemon=True).start()

    def _handle(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        try:
            if self.context is None:
                conn = raw
                conn.recv(1024)  # a TLS ClientHello, unread further
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                conn.close()
                return
            conn = self.context.wrap_socket(raw, server_side=True)
            self.peer_subjects.append(conn.getpeercert())
            with conn:
                while True:
                    head = _recv_exactly(conn, 4)
                    if head is None:
                        return
                    body = _recv_exactly(conn, int.from_bytes(head, "big"))
                    if body is None:
                        return
                    conn.sendall(head + body[::-1])
        except (OSError, ssl.SSLError) as exc:
            self.errors.append(exc)
            raw.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()


def _recv_exactly(conn: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = conn.recv(min(n - len(out), 1 << 20))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("tls"), key_password="s3cret")


def server_context(certs: TestCertificates, *, require_client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_keystore, password="s3cret")
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certs.ca_cert)
    return context


@pytest.fixture
def tls_server(certs: TestCertificates) -> Iterator[FrameServer]:
    server = FrameServer(server_context(certs))
    yield server
    server.close()


def connect(context: ssl.SSLContext, port: int, hostname: str = "localhost") -> KSelector:
    selector = KSelector(SYSTEM_CLOCK, ssl_context=context)
    selector.connect(NODE, "127.0.0.1", port, server_hostname=hostname)
    return selector


def await_connected(selector: KSelector, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        selector.poll(100)
        if NODE in selector.disconnected:
            raise selector.disconnected[NODE]
        if NODE in selector.connected:
            return
    raise AssertionError("the TLS connection did not complete")


def await_failure(selector: KSelector, frame: bytes | None = None, timeout_s: float = 10) -> str:
    """Poll (sending ``frame`` once connected) until the connection fails; its error text."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        selector.poll(100)
        if NODE in selector.disconnected:
            return str(selector.disconnected[NODE])
        if NODE in selector.connected and frame is not None:
            selector.send(NetworkSend(NODE, [frame]))
    raise AssertionError("the connection did not fail")


def exchange(selector: KSelector, frames: list[bytes], timeout_s: float = 20) -> list[bytes]:
    """Send the frames one after another; return the answers (size prefix stripped)."""
    answers: list[bytes] = []
    pending = list(frames)
    in_progress = False
    deadline = time.monotonic() + timeout_s
    while len(answers) < len(frames) and time.monotonic() < deadline:
        if pending and not in_progress:
            selector.send(NetworkSend(NODE, [pending.pop(0)]))
            in_progress = True
        selector.poll(100)
        if selector.completed_sends:
            in_progress = False
        if NODE in selector.disconnected:
            raise selector.disconnected[NODE]
        answers += [bytes(r.payload) for r in selector.completed_receives]
    return answers


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_frames_of_every_size_cross_tls_intact(
    certs: TestCertificates, tls_server: FrameServer
) -> None:
    selector = connect(client_context(truststore_location=certs.ca_cert), tls_server.port)
    try:
        await_connected(selector)
        bodies = [b"x", bytes(range(256)) * 4, b"a" * 70_000, bytes(range(251)) * 12_000]
        answers = exchange(selector, [frame(b) for b in bodies])
        assert answers == [b[::-1] for b in bodies]  # 3 MB crossed in 64 KiB chunks
    finally:
        selector.close()


def test_a_send_made_of_many_buffers_is_regrouped_and_arrives_whole(
    certs: TestCertificates, tls_server: FrameServer
) -> None:
    selector = connect(client_context(truststore_location=certs.ca_cert), tls_server.port)
    try:
        await_connected(selector)
        pieces = [bytes([i % 256]) * (i * 37 % 5000 + 1) for i in range(400)]
        body = b"".join(pieces)
        send = NetworkSend(NODE, [len(body).to_bytes(4, "big"), *pieces])
        selector.send(send)
        deadline = time.monotonic() + 20
        got: list[bytes] = []
        while not got and time.monotonic() < deadline:
            selector.poll(100)
            got += [bytes(r.payload) for r in selector.completed_receives]
        assert got == [body[::-1]]
    finally:
        selector.close()


def test_mutual_tls_presents_the_client_certificate(certs: TestCertificates) -> None:
    server = FrameServer(server_context(certs, require_client_cert=True))
    context = client_context(
        truststore_location=certs.ca_cert,
        keystore_location=certs.client_keystore,
        key_password="s3cret",
    )
    selector = connect(context, server.port)
    try:
        await_connected(selector)
        assert exchange(selector, [frame(b"hello")]) == [b"olleh"]
        subject = dict(x[0] for x in server.peer_subjects[0]["subject"])  # type: ignore[index]
        assert subject["commonName"] == "kclient test client"
    finally:
        selector.close()
        server.close()


def test_a_required_client_certificate_that_is_missing_is_a_clear_failure(
    certs: TestCertificates,
) -> None:
    server = FrameServer(server_context(certs, require_client_cert=True))
    selector = connect(client_context(truststore_location=certs.ca_cert), server.port)
    try:
        # TLS 1.3: the client finishes its side first; the refusal arrives on the next read.
        message = await_failure(selector, frame(b"hello"))
        assert "node 1 at 127.0.0.1" in message
        assert "certificate" in message.lower()
    finally:
        selector.close()
        server.close()


def test_an_untrusted_broker_certificate_names_the_truststore_setting(
    certs: TestCertificates, tls_server: FrameServer
) -> None:
    selector = connect(client_context(truststore_location=certs.other_ca_cert), tls_server.port)
    try:
        message = await_failure(selector)
        assert "certificate verify failed" in message
        assert "'ssl.truststore.location'" in message
        assert f"127.0.0.1:{tls_server.port}" in message
    finally:
        selector.close()


def test_a_broker_name_the_certificate_does_not_cover_fails_unless_checks_are_off(
    certs: TestCertificates, tls_server: FrameServer
) -> None:
    checked = connect(
        client_context(truststore_location=certs.ca_cert), tls_server.port, "broker.example"
    )
    unchecked = connect(
        client_context(truststore_location=certs.ca_cert, check_hostname=False),
        tls_server.port,
        "broker.example",
    )
    try:
        message = await_failure(checked)
        assert "'ssl.endpoint.identification.algorithm'" in message
        await_connected(unchecked)
        assert exchange(unchecked, [frame(b"ok")]) == [b"ko"]
    finally:
        checked.close()
        unchecked.close()


def test_tls_to_a_listener_that_does_not_speak_it_points_at_security_protocol(
    certs: TestCertificates,
) -> None:
    server = FrameServer(None)  # answers the ClientHello with plain text
    selector = connect(client_context(truststore_location=certs.ca_cert), server.port)
    try:
        message = await_failure(selector)
        assert "'security.protocol'" in message
    finally:
        selector.close()
        server.close()
