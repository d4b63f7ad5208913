"""SSL listeners (``security.protocol=SSL``): real clients over TLS, mutual TLS, bad clients.

Every broker listens on 127.0.0.1 with a throw-away CA from ``write_test_certificates``.
confluent-kafka and kcat produce and consume through TLS (records of every size, across
a 3-broker cluster); clients that cannot complete a handshake (PLAINTEXT, garbage, the
wrong CA, no client certificate, gone mid-handshake, silent) are closed one by one, each
with one log line, while the broker keeps serving good clients. Every wait is bounded.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from integration.broker import clients
from integration.broker.clients import Record, cli_broker, new_topic, wait_for_log
from integration.broker.clients import confluent_consume_records as consume
from integration.broker.clients import confluent_produce_records as produce
from kclient.broker import EmbeddedBroker, EmbeddedCluster
from kclient.errors import KafkaError
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.testing.broker_process import broker_process
from kclient.testing.tls import TestCertificates, write_test_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_broker(certs: TestCertificates) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(
        security_protocol="SSL", ssl_keystore_location=certs.server_keystore
    ) as broker:
        yield broker


@pytest.fixture(scope="module")
def mtls_broker(certs: TestCertificates) -> Iterator[EmbeddedBroker]:
    """Mutual TLS: ``ssl.client.auth=required``, client certificates signed by the test CA."""
    with EmbeddedBroker(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_truststore_location=certs.ca_cert,
        ssl_client_auth="required",
    ) as broker:
        yield broker


@pytest.fixture(scope="module", params=["broker", "cluster-of-3"])
def tls_cluster(
    request: pytest.FixtureRequest, certs: TestCertificates
) -> Iterator[EmbeddedCluster]:
    brokers = 1 if request.param == "broker" else 3
    with EmbeddedCluster(
        brokers, security_protocol="SSL", ssl_keystore_location=certs.server_keystore
    ) as cluster:
        yield cluster


# ---- confluent-kafka over TLS ---------------------------------------------------------------


def ssl_settings(
    cluster: EmbeddedCluster, certs: TestCertificates, *, client_cert: bool = False
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": certs.ca_cert,
    }
    if client_cert:
        settings["ssl.certificate.location"] = certs.client_cert
        settings["ssl.key.location"] = certs.client_key
    return settings


def keyed_records(n: int, partitions: int) -> list[Record]:
    out: list[Record] = []
    for i in range(n):
        headers: list[tuple[str, bytes | None]] = [("seq", str(i).encode())]
        if i % 3 == 0:
            headers.append(("trace", bytes(range(i % 50))))
        out.append((i % partitions, f"key-{i}".encode(), f"value-{i}-".encode() * 10, headers))
    return out


def by_partition(records: list[Record]) -> list[Record]:
    """Records ordered as a consumer sees them: partition, then production order."""
    return sorted(records, key=lambda r: r[0])  # stable: keeps production order


def test_confluent_kafka_produces_and_consumes_2000_keyed_records_over_tls(
    tls_cluster: EmbeddedCluster, certs: TestCertificates
) -> None:
    topic = new_topic(tls_cluster, "keyed", partitions=3)
    records = keyed_records(2000, 3)
    settings = ssl_settings(tls_cluster, certs)
    assert produce(settings, topic, records) == []
    assert [tls_cluster.high_watermark(topic, p) for p in range(3)] == [667, 667, 666]
    stored = [
        (p, r.key, r.value, list(r.headers))
        for p in range(3)
        for r in tls_cluster.read_records(topic, p)
    ]
    assert stored == by_partition(records)
    assert consume(settings, topic, 3, len(records)) == by_partition(records)


def test_records_of_900_kb_round_trip_over_tls(
    tls_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    topic = new_topic(tls_broker, "large")
    # distinct, incompressible-looking payloads: many TLS records and partial writes
    values = [
        b"".join(hashlib.sha256(b"%d-%d" % (i, j)).digest() for j in range(900_000 // 32))
        for i in range(16)
    ]
    records: list[Record] = [
        (0, b"big-%d" % i, v, [("n", b"%d" % i)]) for i, v in enumerate(values)
    ]
    # small client socket buffers: the broker reads requests in pieces (incomplete TLS
    # records) and its responses fill the socket (the same chunk is written again)
    settings = {**ssl_settings(tls_broker, certs), "socket.send.buffer.bytes": 8192}
    assert produce({**settings, "linger.ms": 50}, topic, records) == []
    assert [r.value for r in tls_broker.read_records(topic, 0)] == values
    slow_reader = {
        "socket.receive.buffer.bytes": 8192,
        "fetch.max.bytes": 32 * 1024 * 1024,
        "max.partition.fetch.bytes": 32 * 1024 * 1024,
    }
    got = consume({**settings, **slow_reader}, topic, 1, len(records))
    assert [(r[1], hashlib.sha256(r[2] or b"").hexdigest(), r[3]) for r in got] == [
        (r[1], hashlib.sha256(r[2] or b"").hexdigest(), r[3]) for r in records
    ]


def test_metadata_advertises_the_tls_listener(
    tls_cluster: EmbeddedCluster, certs: TestCertificates
) -> None:
    topic = new_topic(tls_cluster, "metadata")
    admin = AdminClient(ssl_settings(tls_cluster, certs))
    brokers = admin.list_topics(topic, timeout=15).brokers
    advertised = sorted(f"{b.host}:{b.port}" for b in brokers.values())
    assert advertised == sorted(tls_cluster.bootstrap_servers.split(","))


# ---- mutual TLS ---------------------------------------------------------------------------


def test_mutual_tls_accepts_a_client_certificate_and_refuses_a_client_without_one(
    mtls_broker: EmbeddedBroker, certs: TestCertificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kclient.broker.selector")
    topic = new_topic(mtls_broker, "mtls")
    good = ssl_settings(mtls_broker, certs, client_cert=True)
    records: list[Record] = [(0, b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(50)]
    assert produce(good, topic, records) == []

    no_cert = {**ssl_settings(mtls_broker, certs), "message.timeout.ms": 1000, "log_level": 0}
    started = time.monotonic()
    failures = produce(no_cert, topic, [(0, b"nope", b"nope", [])], flush_s=15)
    assert failures, "a client without a certificate must not be able to produce"
    assert time.monotonic() - started < 15
    assert mtls_broker.high_watermark(topic) == 50
    wait_for_log(caplog, "sent no certificate")

    # the broker still serves a good client afterwards
    assert produce(good, topic, records) == []
    assert consume(good, topic, 1, 100) == records + records


def test_mutual_tls_refuses_a_certificate_from_an_untrusted_ca(
    mtls_broker: EmbeddedBroker,
    certs: TestCertificates,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kclient.broker.selector")
    stranger = write_test_certificates(tmp_path / "stranger")  # same names, another CA
    context = ssl.create_default_context(cafile=certs.ca_cert)
    context.load_cert_chain(stranger.client_keystore)
    with (
        socket.create_connection(address(mtls_broker), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        peer = peer_of(tls)
        # TLS 1.3: the client's side of the handshake is done before the server checks
        # its certificate; the refusal shows on the first read (an alert, or EOF)
        with pytest.raises((ssl.SSLError, ConnectionError, EOFError)):
            tls.sendall(api_versions_frame(1))
            if tls.recv(4) == b"":
                raise EOFError
    record = wait_for_log(caplog, peer)
    assert "client certificate is not trusted" in record.getMessage()
    assert api_versions_over_tls(mtls_broker, certs, client_cert=True) == [1]


# ---- bad clients on the TLS port ---------------------------------------------------------


def address(cluster: EmbeddedCluster) -> tuple[str, int]:
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


def peer_of(sock: socket.socket) -> str:
    """How the broker names this client in its log lines."""
    return f"127.0.0.1:{sock.getsockname()[1]}"


def api_versions_frame(correlation_id: int) -> bytes:
    body = {"client_software_name": "tls-test", "client_software_version": "1"}
    return b"".join(encode_request(ApiKey.API_VERSIONS, 3, correlation_id, "tls-test", body))


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def tls_client_context(certs: TestCertificates, *, client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.ca_cert)
    if client_cert:
        context.load_cert_chain(certs.client_keystore)
    return context


def api_versions_over_tls(
    cluster: EmbeddedCluster, certs: TestCertificates, *, client_cert: bool = False, count: int = 1
) -> list[int]:
    """Send ``count`` ApiVersions requests in ONE write (one TLS record), then read the
    answers: their correlation ids, in order."""
    context = tls_client_context(certs, client_cert=client_cert)
    with (
        socket.create_connection(address(cluster), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"".join(api_versions_frame(i + 1) for i in range(count)))
        ids = []
        for _ in range(count):
            correlation_id, body = decode_response(ApiKey.API_VERSIONS, 3, read_frame(tls))
            assert body["error_code"] == 0
            ids.append(correlation_id)
        return ids


def closed_by_broker(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """Whether the broker closes the connection within ``timeout_s`` (alerts ignored)."""
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return False


def client_hello() -> bytes:
    """The first flight of a real TLS client (its ClientHello record)."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


BAD_CLIENTS: dict[str, tuple[Callable[[], bytes], str]] = {
    "plaintext-api-versions": (lambda: api_versions_frame(1), "not a TLS client"),
    "garbage": (lambda: b"\x00\xffGET / HTTP/1.1\r\n\r\n" * 4, "failed"),
    "half-a-client-hello": (lambda: client_hello()[:40], "closed the connection during"),
}


@pytest.mark.parametrize("kind", sorted(BAD_CLIENTS))
def test_a_client_that_fails_the_handshake_is_closed_and_logged_and_others_are_served(
    tls_broker: EmbeddedBroker,
    certs: TestCertificates,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    caplog.set_level(logging.INFO, logger="kclient.broker.selector")
    payload, reason = BAD_CLIENTS[kind]
    with socket.create_connection(address(tls_broker), timeout=10) as sock:
        peer = peer_of(sock)
        sock.sendall(payload())
        if kind == "half-a-client-hello":
            sock.shutdown(socket.SHUT_WR)  # gone in the middle of the handshake
        assert closed_by_broker(sock)
    record = wait_for_log(caplog, peer)
    assert "TLS handshake with" in record.getMessage()
    assert reason in record.getMessage()
    assert [r for r in caplog.records if peer in r.getMessage()] == [record]  # one line
    assert api_versions_over_tls(tls_broker, certs) == [1]


def test_a_client_trusting_another_ca_is_refused_and_the_broker_keeps_serving(
    tls_broker: EmbeddedBroker, certs: TestCertificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kclient.broker.selector")
    context = ssl.create_default_context(cafile=certs.other_ca_cert)
    with socket.create_connection(address(tls_broker), timeout=10) as raw:
        peer = peer_of(raw)
        with pytest.raises(ssl.SSLCertVerificationError):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    assert "rejected the handshake" in wait_for_log(caplog, peer).getMessage()
    assert api_versions_over_tls(tls_broker, certs) == [1]


def test_a_plaintext_confluent_client_fails_and_the_broker_keeps_serving(
    tls_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    topic = new_topic(tls_broker, "plaintext-client")
    plaintext = {
        "bootstrap.servers": tls_broker.bootstrap_servers,
        "security.protocol": "PLAINTEXT",
        "message.timeout.ms": 1000,
        "socket.timeout.ms": 2000,
        "log_level": 0,
    }
    assert produce(plaintext, topic, [(0, b"k", b"plain", [])], flush_s=10)
    assert tls_broker.high_watermark(topic) == 0
    good = ssl_settings(tls_broker, certs)
    assert produce(good, topic, [(0, b"k", b"tls", [])]) == []
    assert consume(good, topic, 1, 1) == [(0, b"k", b"tls", [])]


def test_pipelined_requests_in_one_tls_record_are_all_answered(
    tls_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    # the 2nd and 3rd requests wait decrypted inside the broker's SSL object, where
    # select() cannot see them: the broker must read them once the first is answered
    assert api_versions_over_tls(tls_broker, certs, count=3) == [1, 2, 3]


def test_a_silent_connection_is_closed_when_the_handshake_times_out(
    certs: TestCertificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kclient.broker.selector")
    with EmbeddedBroker(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        connections_max_idle_ms=1000,
    ) as broker:
        with socket.create_connection(address(broker), timeout=10) as sock:
            peer = peer_of(sock)
            started = time.monotonic()
            assert closed_by_broker(sock, timeout_s=10)
            assert 0.9 < time.monotonic() - started < 5
        assert "not complete after 1 s" in wait_for_log(caplog, peer).getMessage()
        assert api_versions_over_tls(broker, certs) == [1]


# ---- kcat, the command line, a broker process -------------------------------------------


@pytest.mark.parametrize("new_librdkafka", [False, True], ids=["debian", "wheel-librdkafka"])
def test_kcat_produces_over_tls_and_confluent_kafka_reads_back(
    tls_broker: EmbeddedBroker, certs: TestCertificates, new_librdkafka: bool
) -> None:
    topic = new_topic(tls_broker, "kcat")
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs.ca_cert}"]
    lines = [f"key-{i}\tvalue {i} over TLS" for i in range(200)]
    clients.kcat(
        ["-P", "-b", tls_broker.bootstrap_servers, "-t", topic, "-p", "0", "-K", "\t", *tls],
        new_librdkafka,
        stdin="".join(line + "\n" for line in lines).encode(),
    )
    got = consume(ssl_settings(tls_broker, certs), topic, 1, len(lines))
    assert [f"{(r[1] or b'').decode()}\t{(r[2] or b'').decode()}" for r in got] == lines
    listing = clients.kcat(
        ["-L", "-b", tls_broker.bootstrap_servers, "-t", topic, *tls], new_librdkafka
    )
    assert f"at {tls_broker.bootstrap_servers}" in listing.decode()


def test_kcat_consumes_with_a_client_certificate(
    mtls_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    topic = new_topic(mtls_broker, "kcat-mtls")
    records: list[Record] = [(0, None, b"m%d" % i, []) for i in range(20)]
    assert produce(ssl_settings(mtls_broker, certs, client_cert=True), topic, records) == []
    args = [
        "-C",
        "-b",
        mtls_broker.bootstrap_servers,
        "-t",
        topic,
        "-p",
        "0",
        "-o",
        "beginning",
        "-c",
        "20",
        "-e",
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={certs.ca_cert}",
        "-X",
        f"ssl.certificate.location={certs.client_cert}",
        "-X",
        f"ssl.key.location={certs.client_key}",
    ]
    assert clients.kcat(args, new_librdkafka=True).decode().split() == [f"m{i}" for i in range(20)]


def test_cli_runs_an_ssl_cluster_and_refuses_a_bad_keystore(
    certs: TestCertificates, tmp_path: Path
) -> None:
    flags = (
        "--brokers",
        "2",
        "--security-protocol",
        "SSL",
        "--ssl-keystore-location",
        certs.server_keystore,
        "--ssl-truststore-location",
        certs.ca_cert,
        "--ssl-client-auth",
        "required",
    )
    with cli_broker(*flags) as (_proc, bootstrap):
        settings = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": certs.ca_cert,
            "ssl.certificate.location": certs.client_cert,
            "ssl.key.location": certs.client_key,
        }
        assert produce(settings, "cli-auto", [(-1, b"k", b"v", [])]) == []
        assert consume(settings, "cli-auto", 1, 1) == [(0, b"k", b"v", [])]

    not_pem = tmp_path / "keystore.jks"
    not_pem.write_bytes(b"\xfe\xed\xfe\xed not a PEM file")
    for keystore, setting in (
        (str(tmp_path / "missing.pem"), "no such file"),
        (str(not_pem), "PEM"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "kclient.broker",
                "--listen",
                "127.0.0.1:0",
                "--security-protocol",
                "SSL",
                "--ssl-keystore-location",
                keystore,
            ],
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 2
        assert b"'ssl.keystore.location'" in result.stderr and setting.encode() in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "kclient.broker", "--security-protocol", "SASL_SSL"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2 and b"SASL_SSL needs 'ssl.keystore.location'" in result.stderr


def test_broker_process_with_an_encrypted_key(tmp_path: Path) -> None:
    certs = write_test_certificates(tmp_path, key_password="s3cret")
    flags = ["--security-protocol", "SSL", "--ssl-keystore-location", certs.server_keystore]
    with broker_process(*flags, "--ssl-key-password", "s3cret") as broker:
        assert broker.security_protocol == "SSL"
        settings = {
            "bootstrap.servers": broker.bootstrap_servers,
            "security.protocol": broker.security_protocol,
            "ssl.ca.location": certs.ca_cert,
        }
        assert produce(settings, "process", [(0, None, b"x" * 5000, [])]) == []
        assert consume(settings, "process", 1, 1) == [(0, None, b"x" * 5000, [])]
    with (
        pytest.raises(KafkaError, match=r"'ssl\.key\.password'"),
        broker_process(*flags, "--ssl-key-password", "wrong", start_timeout_s=20),
    ):
        pass
