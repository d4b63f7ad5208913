"""SASL listeners (SASL_PLAINTEXT, SASL_SSL): real clients authenticate, bad ones are closed.

confluent-kafka (librdkafka), kcat and kclient authenticate with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 and round-trip records; wrong passwords and mechanisms that are not
enabled fail within bounded time. Raw sockets (kclient's SCRAM client computing the
tokens) try what a broken or hostile client would: requests before authenticating,
garbage, truncated and replayed tokens, a wrong nonce, huge frames, going silent. Each
such connection is closed with one log line and the broker keeps serving others.
Re-authentication (KIP-368, ``connections.max.reauth.ms``): librdkafka re-authenticates
while producing; a raw client that does not is closed once its session has expired.
Everything listens on 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import base64
import itertools
import logging
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from integration.broker import clients
from integration.broker.clients import Record, cli_broker, new_topic, wait_for_log
from integration.broker.clients import confluent_consume_records as consume
from integration.broker.clients import confluent_produce_records as produce
from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker, EmbeddedCluster
from kclient.errors import KafkaError
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.sasl import ScramMechanism
from kclient.testing.broker_process import broker_process
from kclient.testing.tls import TestCertificates, write_test_certificates

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PASSWORD = "alice-s3cret"
#: a user name that SCRAM must escape, a password with the separators of the CLI
USERS = {"alice": PASSWORD, "b,o=b": "pw:with,odd=chars"}


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(security_protocol="SASL_PLAINTEXT", sasl_users=USERS) as b:
        yield b


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("sasl-tls"))


@pytest.fixture
def broker_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="kclient.broker")
    return caplog


# ---- confluent-kafka -------------------------------------------------------------------------


def sasl_settings(
    cluster: EmbeddedCluster,
    mechanism: str,
    user: str = "alice",
    password: str = PASSWORD,
    certs: TestCertificates | None = None,
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": cluster.security_protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if certs is not None:
        settings["ssl.ca.location"] = certs.ca_cert
    return settings


def keyed_records(n: int, partitions: int) -> list[Record]:
    return [
        (i % partitions, f"key-{i}".encode(), f"value-{i}-".encode() * 7, [("seq", b"%d" % i)])
        for i in range(n)
    ]


def in_partition_order(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: r[0])  # stable: production order per partition


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_round_trips_records_with_each_mechanism(
    broker: EmbeddedBroker, mechanism: str
) -> None:
    topic = new_topic(broker, f"rt-{mechanism.lower()}", partitions=3)
    records = keyed_records(600, 3)
    settings = sasl_settings(broker, mechanism)
    assert produce(settings, topic, records) == []
    stored = [
        (p, r.key, r.value, list(r.headers))
        for p in range(3)
        for r in broker.read_records(topic, p)
    ]
    assert stored == in_partition_order(records)
    assert consume(settings, topic, 3, len(records)) == in_partition_order(records)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_user_name_that_scram_escapes_authenticates(
    broker: EmbeddedBroker, mechanism: str
) -> None:
    topic = new_topic(broker, "escaped")
    settings = sasl_settings(broker, mechanism, "b,o=b", USERS["b,o=b"])
    assert produce(settings, topic, [(0, b"k", b"v", [])]) == []
    assert consume(settings, topic, 1, 1) == [(0, b"k", b"v", [])]


def test_sasl_ssl_with_scram_sha_512_across_two_brokers(tmp_path: Path) -> None:
    certs = write_test_certificates(tmp_path)
    with EmbeddedCluster(
        2,
        security_protocol="SASL_SSL",
        ssl_keystore_location=certs.server_keystore,
        sasl_users=USERS,
        sasl_enabled_mechanisms=("SCRAM-SHA-512",),
    ) as cluster:
        topic = new_topic(cluster, "sasl-ssl", partitions=4)
        assert {cluster.leader(topic, p) for p in range(4)} == {0, 1}  # both brokers
        records = keyed_records(400, 4)
        # large values too: many TLS records per request, after the SASL exchange
        records += [(p, b"big", bytes([p]) * 300_000, []) for p in range(4)]
        settings = sasl_settings(cluster, "SCRAM-SHA-512", certs=certs)
        assert produce(settings, topic, records) == []
        assert consume(settings, topic, 4, len(records)) == in_partition_order(records)
        # no TLS: the broker sees garbage where a ClientHello belongs, the client fails
        plain = {**settings, "security.protocol": "SASL_PLAINTEXT", "log_level": 0}
        assert produce({**plain, "message.timeout.ms": 1000}, topic, [(0, None, b"x", [])], 10)


def failed_connections(caplog: pytest.LogCaptureFixture) -> dict[str, list[str]]:
    """The broker's SASL failure lines, by connection id."""
    out: dict[str, list[str]] = {}
    for record in caplog.records:
        text = record.getMessage()
        match = re.search(r"SASL authentication of \S+ failed \(connection (\S+),", text)
        if match:
            out.setdefault(match.group(1), []).append(text)
    return out


@pytest.mark.parametrize(
    ("mechanism", "client_sees"),
    [
        ("PLAIN", "Invalid username or password"),
        ("SCRAM-SHA-256", "invalid credentials"),
        ("SCRAM-SHA-512", "invalid credentials"),
    ],
)
def test_a_wrong_password_fails_in_bounded_time_and_the_broker_keeps_serving(
    broker: EmbeddedBroker,
    broker_log: pytest.LogCaptureFixture,
    mechanism: str,
    client_sees: str,
) -> None:
    topic = new_topic(broker, "wrong-password")
    reported: list[confluent_kafka.KafkaError] = []
    wrong = {
        **sasl_settings(broker, mechanism, password="not-" + PASSWORD),
        "message.timeout.ms": 1000,
        "reconnect.backoff.ms": 500,
        "error_cb": reported.append,
        "log_level": 0,
    }
    started = time.monotonic()
    failures = produce(wrong, topic, [(0, b"k", b"refused", [])], flush_s=15)
    assert failures, "a client with a wrong password must not be able to produce"
    assert time.monotonic() - started < 15
    assert broker.high_watermark(topic) == 0
    auth_errors = [e for e in reported if e.code() == confluent_kafka.KafkaError._AUTHENTICATION]
    assert auth_errors and client_sees in auth_errors[0].str()
    by_connection = failed_connections(broker_log)
    assert by_connection, "the broker must log the failure"
    for lines in by_connection.values():
        assert len(lines) == 1  # one line per failed connection
        assert f"mechanism {mechanism}, user 'alice'" in lines[0]
        assert "wrong password" in lines[0]
        assert PASSWORD not in lines[0]
    assert all(PASSWORD not in r.getMessage() for r in broker_log.records)
    good = sasl_settings(broker, mechanism)
    assert produce(good, topic, [(0, b"k", b"welcome", [])]) == []
    assert consume(good, topic, 1, 1) == [(0, b"k", b"welcome", [])]


def test_a_mechanism_that_is_not_enabled_fails_naming_it(
    broker_log: pytest.LogCaptureFixture,
) -> None:
    with EmbeddedBroker(
        security_protocol="SASL_PLAINTEXT",
        sasl_users=USERS,
        sasl_enabled_mechanisms=("SCRAM-SHA-512",),
    ) as scram_only:
        topic = new_topic(scram_only, "mechanism")
        reported: list[confluent_kafka.KafkaError] = []
        plain = {
            **sasl_settings(scram_only, "PLAIN"),
            "message.timeout.ms": 1000,
            "error_cb": reported.append,
            "log_level": 0,
        }
        started = time.monotonic()
        assert produce(plain, topic, [(0, None, b"x", [])], flush_s=15)
        assert time.monotonic() - started < 15
        text = " ".join(e.str() for e in reported)
        assert "PLAIN" in text and "SCRAM-SHA-512" in text  # what it asked, what is enabled
        line = next(iter(failed_connections(broker_log).values()))[0]
        assert "mechanism 'PLAIN' is not enabled (sasl.enabled.mechanisms: SCRAM-SHA-512)" in line
        assert (
            produce(sasl_settings(scram_only, "SCRAM-SHA-512"), topic, [(0, None, b"y", [])]) == []
        )


def test_a_sasl_client_on_a_plaintext_listener_fails_and_it_keeps_serving() -> None:
    with EmbeddedBroker() as plaintext:
        topic = new_topic(plaintext, "no-sasl")
        settings = {
            **sasl_settings(plaintext, "SCRAM-SHA-256"),
            "security.protocol": "SASL_PLAINTEXT",
            "message.timeout.ms": 1000,
            "log_level": 0,
        }
        assert produce(settings, topic, [(0, None, b"x", [])], flush_s=10)
        ok = {"bootstrap.servers": plaintext.bootstrap_servers}
        assert produce(ok, topic, [(0, None, b"y", [])]) == []
        assert plaintext.high_watermark(topic) == 1


# ---- raw sockets: the protocol, step by step ---------------------------------------------


class Raw:
    """One client connection speaking Kafka frames."""

    def __init__(self, cluster: EmbeddedCluster | str) -> None:
        """A connection to the first broker of ``cluster`` (or of a bootstrap string)."""
        bootstrap = cluster if isinstance(cluster, str) else cluster.bootstrap_servers
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        #: how the broker names this client in its log lines
        self.peer = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self._correlation = itertools.count(1)

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        corr = next(self._correlation)
        self.sock.sendall(b"".join(encode_request(api_key, version, corr, "sasl-test", body)))
        return corr

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        corr = self.send(api_key, version, body)
        got, response = decode_response(api_key, version, self.read_frame())
        assert got == corr
        return response

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def handshake(self, mechanism: str, version: int = 1) -> dict[str, Any]:
        return self.call(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})

    def authenticate(self, token: bytes, version: int = 2) -> dict[str, Any]:
        return self.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})

    def api_versions(self) -> dict[str, Any]:
        body = {"client_software_name": "sasl-test", "client_software_version": "1"}
        return self.call(ApiKey.API_VERSIONS, 3, body)

    def metadata(self) -> dict[str, Any]:
        return self.call(ApiKey.METADATA, 12, {"topics": []})

    def login(
        self,
        mechanism: str = "SCRAM-SHA-256",
        user: str = "alice",
        password: str = PASSWORD,
        version: int = 2,
    ) -> dict[str, Any]:
        """Authenticate (or re-authenticate); the last SaslAuthenticate response."""
        assert self.handshake(mechanism)["error_code"] == 0
        if mechanism == "PLAIN":
            done = self.authenticate(f"\0{user}\0{password}".encode(), version)
            assert done["error_code"] == 0, done
            return done
        client = ScramMechanism(mechanism, user, password)
        first = self.authenticate(client.initial_response(), version)
        assert first["error_code"] == 0, first
        final = client.respond(bytes(first["auth_bytes"]))
        assert final is not None
        last = self.authenticate(final, version)
        assert last["error_code"] == 0, last
        assert client.respond(bytes(last["auth_bytes"])) is None  # the server's signature is right
        return last

    def closed_by_broker(self, timeout_s: float = 10.0) -> bool:
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self.sock.recv(65536) == b"":
                    return True
        except ConnectionError:
            return True
        except TimeoutError:
            return False
        return False


def assert_one_line(caplog: pytest.LogCaptureFixture, peer: str, *texts: str) -> str:
    """The one log line about ``peer``, which says ``texts``."""
    line = wait_for_log(caplog, peer).getMessage()
    time.sleep(0.05)  # a second line would be written right after the first
    assert [r.getMessage() for r in caplog.records if peer in r.getMessage()] == [line]
    for text in texts:
        assert text in line
    assert PASSWORD not in line
    return line


def assert_still_serving(cluster: EmbeddedCluster) -> None:
    with Raw(cluster) as good:
        assert good.api_versions()["error_code"] == 0
        good.login("SCRAM-SHA-512")
        assert [b["node_id"] for b in good.metadata()["brokers"]] == [0]


def test_raw_plain_and_scram_logins_then_any_request(broker: EmbeddedBroker) -> None:
    for mechanism in MECHANISMS:
        with Raw(broker) as raw:
            versions = {k["api_key"]: k for k in raw.api_versions()["api_keys"]}
            assert versions[ApiKey.SASL_HANDSHAKE]["max_version"] == 1
            assert versions[ApiKey.SASL_AUTHENTICATE]["max_version"] == 2
            handshake = raw.handshake(mechanism)
            assert handshake == {"error_code": 0, "mechanisms": MECHANISMS}
            raw.sock.close()
        with Raw(broker) as raw:  # no ApiVersions first: allowed too
            raw.login(mechanism)
            assert raw.metadata()["cluster_id"] == "kclient-embedded"
            # re-authentication is off (connections.max.reauth.ms is 0): a second handshake
            # gets a clean error, not a crash
            assert raw.handshake(mechanism)["error_code"] == 34  # ILLEGAL_SASL_STATE
            assert raw.metadata()["brokers"]


def test_sasl_authenticate_v0_and_v1_are_answered_in_their_format(broker: EmbeddedBroker) -> None:
    for version in (0, 1):
        with Raw(broker) as raw:
            assert raw.handshake("PLAIN")["error_code"] == 0
            done = raw.authenticate(f"\0alice\0{PASSWORD}".encode(), version=version)
            assert done["error_code"] == 0 and ("session_lifetime_ms" in done) == (version == 1)


def test_metadata_before_authenticating_closes_the_connection(
    broker: EmbeddedBroker, broker_log: pytest.LogCaptureFixture
) -> None:
    with Raw(broker) as raw:
        raw.send(ApiKey.METADATA, 12, {"topics": []})
        assert raw.closed_by_broker()
        assert_one_line(broker_log, raw.peer, "request Metadata before SASL authentication")
    assert_still_serving(broker)


def scram_first(raw: Raw, nonce: str | None = None) -> tuple[ScramMechanism, bytes]:
    """Handshake and client-first with kclient's client; returns it and its client-final."""
    client = ScramMechanism("SCRAM-SHA-256", "alice", PASSWORD, nonce=nonce)
    assert raw.handshake("SCRAM-SHA-256")["error_code"] == 0
    first = raw.authenticate(client.initial_response())
    assert first["error_code"] == 0
    final = client.respond(bytes(first["auth_bytes"]))
    assert final is not None
    return client, final


def replayed_client_final(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    with Raw(cluster) as earlier:  # a successful exchange, overheard
        _, heard = scram_first(earlier, nonce="fixed-client-nonce")
        assert earlier.authenticate(heard)["error_code"] == 0
    scram_first(raw, nonce="fixed-client-nonce")  # same client nonce, new server nonce
    return raw.authenticate(heard)


def wrong_nonce(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    _, final = scram_first(raw)
    return raw.authenticate(final.replace(b",r=", b",r=X", 1))


def truncated_client_final(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    _, final = scram_first(raw)
    return raw.authenticate(final[: len(final) // 2])


def garbage_client_first(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    assert raw.handshake("SCRAM-SHA-512")["error_code"] == 0
    return raw.authenticate(b"\xff\x00garbage,,=,\x01" * 10)


def garbage_plain(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    assert raw.handshake("PLAIN")["error_code"] == 0
    return raw.authenticate(b"alice:" + PASSWORD.encode())


def big_user_name(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    # within sasl.server.max.receive.size: answered (as an unknown user), then refused
    assert raw.handshake("SCRAM-SHA-256")["error_code"] == 0
    first = raw.authenticate(b"n,,n=" + b"u" * 400_000 + b",r=abc")
    server_first = bytes(first["auth_bytes"])
    assert first["error_code"] == 0 and server_first.startswith(b"r=abc")
    nonce = server_first.split(b",")[0]
    return raw.authenticate(b"c=biws," + nonce + b",p=" + base64.b64encode(bytes(32)))


def handshake_v0(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    return raw.handshake("PLAIN", version=0)


def authenticate_first(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    return raw.authenticate(f"\0alice\0{PASSWORD}".encode())


def second_handshake(raw: Raw, cluster: EmbeddedCluster) -> dict[str, Any]:
    assert raw.handshake("PLAIN")["error_code"] == 0
    return raw.handshake("PLAIN")


#: name -> (what the client does, the error code it gets, what the broker's line says)
BAD_EXCHANGES: dict[str, tuple[Callable[[Raw, EmbeddedCluster], dict[str, Any]], int, str]] = {
    "replayed-client-final": (replayed_client_final, 58, "nonce does not match"),
    "wrong-nonce": (wrong_nonce, 58, "nonce does not match"),
    "truncated-client-final": (truncated_client_final, 58, "malformed"),
    "garbage-client-first": (garbage_client_first, 58, "malformed SCRAM-SHA-512 client-first"),
    "garbage-plain-token": (garbage_plain, 58, "malformed PLAIN token"),
    "big-user-name": (big_user_name, 58, "unknown user"),
    "sasl-handshake-v0": (handshake_v0, 35, "SaslHandshake v0"),
    "authenticate-before-handshake": (authenticate_first, 34, "before a successful"),
    "second-handshake": (second_handshake, 34, "SaslHandshake in the middle"),
}


@pytest.mark.parametrize("kind", sorted(BAD_EXCHANGES))
def test_a_bad_exchange_is_answered_then_closed_with_one_log_line(
    broker: EmbeddedBroker, broker_log: pytest.LogCaptureFixture, kind: str
) -> None:
    action, code, reason = BAD_EXCHANGES[kind]
    with Raw(broker) as raw:
        response = action(raw, broker)
        assert response["error_code"] == code
        assert raw.closed_by_broker()
        line = assert_one_line(broker_log, raw.peer, "SASL authentication of", reason)
        assert len(line) < 600  # a 400 KB user name is cut short in the log
    assert_still_serving(broker)


def raw_plain_token(raw: Raw) -> None:
    # pre-KIP-43 clients sent the token as a bare frame, with no SaslHandshake
    token = f"\0alice\0{PASSWORD}".encode()
    raw.sock.sendall(struct.pack(">i", len(token)) + token)


def huge_frame(raw: Raw) -> None:
    assert raw.handshake("PLAIN")["error_code"] == 0
    raw.sock.sendall(struct.pack(">i", 600_000) + b"\0alice\0" + b"x" * 1000)


def api_versions_mid_exchange(raw: Raw) -> None:
    scram_first(raw)
    raw.send(ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})


def garbage_frame(raw: Raw) -> None:
    raw.sock.sendall(b"\x00\x00\x00\x08\xff\xff\xff\xff\x00\x00\x00\x01")


BAD_FRAMES: dict[str, tuple[Callable[[Raw], None], str]] = {
    "raw-plain-token": (raw_plain_token, "raw SASL tokens without SaslHandshake"),
    "frame-over-sasl-max-receive-size": (huge_frame, "sasl.server.max.receive.size is 524288"),
    "api-versions-mid-exchange": (api_versions_mid_exchange, "ApiVersions in the middle"),
    "garbage-frame": (garbage_frame, "before SASL authentication"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FRAMES))
def test_a_bad_frame_before_authentication_closes_with_one_log_line(
    broker: EmbeddedBroker, broker_log: pytest.LogCaptureFixture, kind: str
) -> None:
    action, reason = BAD_FRAMES[kind]
    with Raw(broker) as raw:
        action(raw)
        assert raw.closed_by_broker()
        assert_one_line(broker_log, raw.peer, reason)
    assert_still_serving(broker)


def test_a_client_that_stops_mid_exchange_is_closed_after_the_timeout(
    broker_log: pytest.LogCaptureFixture,
) -> None:
    with EmbeddedBroker(
        security_protocol="SASL_PLAINTEXT", sasl_users=USERS, connections_max_idle_ms=1000
    ) as quick:
        # both at once: each waits out the same second
        with Raw(quick) as raw, Raw(quick) as silent:  # silent: not even a handshake
            started = time.monotonic()
            scram_first(raw)  # ... and never sends the client-final
            assert raw.closed_by_broker(timeout_s=10)
            assert 0.9 < time.monotonic() - started < 5
            assert_one_line(
                broker_log,
                raw.peer,
                "mechanism SCRAM-SHA-256, user 'alice'",
                "not complete after 1 s",
            )
            assert silent.closed_by_broker(timeout_s=10)
            assert_one_line(broker_log, silent.peer, "not complete after 1 s")
        assert_still_serving(quick)


def test_a_client_gone_mid_exchange_is_logged(
    broker: EmbeddedBroker, broker_log: pytest.LogCaptureFixture
) -> None:
    with Raw(broker) as raw:
        scram_first(raw)
        peer = raw.peer
    assert_one_line(broker_log, peer, "interrupted", "user 'alice'", "closed by peer")
    assert_still_serving(broker)


def test_sasl_requests_on_a_plaintext_listener_get_clean_errors() -> None:
    with EmbeddedBroker() as plaintext, Raw(plaintext) as raw:
        versions = {k["api_key"] for k in raw.api_versions()["api_keys"]}
        assert ApiKey.SASL_HANDSHAKE not in versions
        assert raw.handshake("PLAIN") == {"error_code": 33, "mechanisms": []}
        assert raw.authenticate(b"\0alice\0pw")["error_code"] == 34
        assert raw.metadata()["brokers"]  # the connection is still good


def test_many_clients_authenticate_at_once(broker: EmbeddedBroker) -> None:
    failures: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with Raw(broker) as raw:
                raw.login(
                    MECHANISMS[i % 3], *(("alice", PASSWORD), ("b,o=b", USERS["b,o=b"]))[i % 2]
                )
                assert raw.metadata()["brokers"]
        except BaseException as exc:  # reported below, from the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert failures == []
    handshakes = broker.metrics()[0].requests["SaslHandshake"]
    assert handshakes.requests >= 30


# ---- re-authentication (KIP-368) -------------------------------------------------------------

#: Short enough for a test, long enough that a login and a request fit well within it.
RAW_LIFETIME_MS = 500


def expired_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "SASL session" in r.getMessage()]


def renewed_everywhere(cluster: EmbeddedCluster) -> bool:
    return all(s.successful_reauthentications >= 1 for s in cluster.metrics())


def test_confluent_kafka_re_authenticates_while_producing(
    broker_log: pytest.LogCaptureFixture,
) -> None:
    with EmbeddedCluster(
        2,
        security_protocol="SASL_PLAINTEXT",
        sasl_users=USERS,
        sasl_enabled_mechanisms=("SCRAM-SHA-256",),
        connections_max_reauth_ms=3000,  # librdkafka re-authenticates 300 ms before the end
    ) as cluster:
        topic = new_topic(cluster, "reauth", partitions=2)
        assert {cluster.leader(topic, p) for p in range(2)} == {0, 1}
        reported: list[confluent_kafka.KafkaError] = []
        producer = confluent_kafka.Producer(
            {
                **sasl_settings(cluster, "SCRAM-SHA-256"),
                "acks": "all",
                "linger.ms": 5,
                "error_cb": reported.append,
            }
        )
        failures: list[str] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(str(err))

        sent = 0
        # 3 s sessions: with 1 s ones, the 100 ms librdkafka leaves (it re-authenticates at
        # 90%) was too little on a loaded machine. Produce until every broker has seen a
        # re-authentication (about 2.7 s), then for 0.5 s more on the renewed sessions.
        deadline = time.monotonic() + 15.0
        renewed_at = None
        while time.monotonic() < deadline:
            producer.produce(topic, value=b"r%d" % sent, partition=sent % 2, on_delivery=delivered)
            sent += 1
            producer.poll(0.01)
            if renewed_at is None and sent % 20 == 0 and renewed_everywhere(cluster):
                renewed_at = time.monotonic()
            if renewed_at is not None and time.monotonic() > renewed_at + 0.5:
                break
        assert producer.flush(15) == 0, "not every record was acknowledged"
        assert failures == [] and reported == []
        stored = [r.value for p in range(2) for r in cluster.read_records(topic, p)]
        assert sorted(stored) == sorted(b"r%d" % i for i in range(sent))
        snapshots = cluster.metrics()
        # every broker's connection lived through its session's end by re-authenticating
        assert all(s.successful_reauthentications >= 1 for s in snapshots), snapshots
        assert [s.expired_connections_killed for s in snapshots] == [0, 0]
        assert expired_lines(broker_log) == []


@pytest.fixture(scope="module")
def expiring_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(
        security_protocol="SASL_PLAINTEXT",
        sasl_users=USERS,
        connections_max_reauth_ms=RAW_LIFETIME_MS,
    ) as b:
        yield b


def killed(broker: EmbeddedBroker) -> int:
    return broker.metrics()[0].expired_connections_killed


@pytest.mark.parametrize("version", [0, 2])
def test_a_client_that_does_not_re_authenticate_is_closed_after_expiry(
    expiring_broker: EmbeddedBroker, broker_log: pytest.LogCaptureFixture, version: int
) -> None:
    before = killed(expiring_broker)
    with Raw(expiring_broker) as raw:
        assert raw.api_versions()["error_code"] == 0
        done = raw.login("PLAIN", version=version)
        # SaslAuthenticate v0 has no session_lifetime_ms: that client only sees the close
        assert done.get("session_lifetime_ms") == (RAW_LIFETIME_MS if version else None)
        assert raw.metadata()["brokers"]  # within the session
        time.sleep(RAW_LIFETIME_MS / 1000 + 0.1)
        assert raw.api_versions()["error_code"] == 0  # still let through
        raw.send(ApiKey.METADATA, 12, {"topics": []})
        assert raw.closed_by_broker()
        assert_one_line(
            broker_log,
            raw.peer,
            "SASL session (user 'alice') expired",
            f"connections.max.reauth.ms is {RAW_LIFETIME_MS}",
            "Metadata",
        )
    assert killed(expiring_broker) == before + 1
    assert_still_serving(expiring_broker)


def test_re_authentication_renews_the_session_on_the_same_connection(
    expiring_broker: EmbeddedBroker, broker_log: pytest.LogCaptureFixture
) -> None:
    before = expiring_broker.metrics()[0]
    with Raw(expiring_broker) as raw:
        assert raw.login("SCRAM-SHA-256")["session_lifetime_ms"] == RAW_LIFETIME_MS
        time.sleep(RAW_LIFETIME_MS / 1000 + 0.1)  # expired: only re-authentication is left
        assert raw.login("SCRAM-SHA-256")["session_lifetime_ms"] == RAW_LIFETIME_MS
        assert raw.metadata()["brokers"]  # served: the session was renewed
        assert raw.login("SCRAM-SHA-256")["session_lifetime_ms"] == RAW_LIFETIME_MS  # early too
        assert raw.metadata()["brokers"]
        # another user, with the right password: refused, the connection closed
        assert raw.handshake("PLAIN")["error_code"] == 0
        refused = raw.authenticate(f"\0alice\0{PASSWORD}".encode())
        assert refused["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
        assert "mechanism cannot change from SCRAM-SHA-256 to PLAIN" in refused["error_message"]
        assert raw.closed_by_broker()
        assert_one_line(broker_log, raw.peer, "SASL re-authentication of", "mechanism PLAIN")
    with Raw(expiring_broker) as other:
        other.login("SCRAM-SHA-512")
        client = ScramMechanism("SCRAM-SHA-512", "b,o=b", USERS["b,o=b"])
        assert other.handshake("SCRAM-SHA-512")["error_code"] == 0
        first = other.authenticate(client.initial_response())
        assert first["error_code"] == 0
        final = client.respond(bytes(first["auth_bytes"]))
        assert final is not None
        refused = other.authenticate(final)
        assert refused["error_code"] == 58
        assert refused["error_message"].endswith("the user cannot change from alice to b,o=b")
        assert other.closed_by_broker()
        assert_one_line(broker_log, other.peer, "SASL re-authentication of", "as user 'b,o=b'")
    after = expiring_broker.metrics()[0]
    assert after.successful_reauthentications == before.successful_reauthentications + 2
    assert after.expired_connections_killed == before.expired_connections_killed


# ---- kclient's own producer --------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_kclient_produces_over_sasl_and_confluent_reads_back(
    certs: TestCertificates, protocol: str, mechanism: str
) -> None:
    tls = {"ssl_keystore_location": certs.server_keystore} if protocol == "SASL_SSL" else {}
    with EmbeddedCluster(2, security_protocol=protocol, sasl_users=USERS, **tls) as cluster:
        topic = new_topic(cluster, "kclient", partitions=2)
        client_tls = {"ssl_truststore_location": certs.ca_cert} if tls else {}
        with KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username="b,o=b",
            sasl_password=USERS["b,o=b"],
            **client_tls,
        ) as producer:
            futures = [
                producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
                for i in range(200)
            ]
            producer.flush(30)
            assert [f.result(0).offset for f in futures[:4]] == [0, 0, 1, 1]
        settings = sasl_settings(cluster, mechanism, certs=certs if tls else None)
        got = consume(settings, topic, 2, 200)
        assert sorted((r[1], r[2]) for r in got) == sorted(
            (b"k%d" % i, b"v%d" % i) for i in range(200)
        )

        with (
            pytest.raises(KafkaError, match="authentication as 'alice'"),
            KafkaProducer(
                bootstrap_servers=cluster.bootstrap_servers,
                security_protocol=protocol,
                sasl_mechanism=mechanism,
                sasl_username="alice",
                sasl_password="wrong",
                max_block_ms=3000,
                **client_tls,
            ) as refused,
        ):
            refused.send(topic, value=b"nope").result(10)
        assert sum(cluster.high_watermark(topic, p) for p in range(2)) == 200


# ---- kcat, the command line, a broker process ----------------------------------------------


@pytest.mark.parametrize("new_librdkafka", [False, True], ids=["debian", "wheel-librdkafka"])
def test_kcat_produces_with_scram_and_lists_metadata(
    broker: EmbeddedBroker, new_librdkafka: bool
) -> None:
    topic = new_topic(broker, "kcat")
    sasl = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-256",
        "-X",
        "sasl.username=alice",
        "-X",
        f"sasl.password={PASSWORD}",
    ]
    lines = [f"key-{i}\tvalue {i} over SASL" for i in range(100)]
    clients.kcat(
        ["-P", "-b", broker.bootstrap_servers, "-t", topic, "-p", "0", "-K", "\t", *sasl],
        new_librdkafka,
        stdin="".join(line + "\n" for line in lines).encode(),
    )
    got = consume(sasl_settings(broker, "PLAIN"), topic, 1, len(lines))
    assert [f"{(r[1] or b'').decode()}\t{(r[2] or b'').decode()}" for r in got] == lines
    listing = clients.kcat(
        ["-L", "-b", broker.bootstrap_servers, "-t", topic, *sasl], new_librdkafka
    )
    assert f"at {broker.bootstrap_servers}" in listing.decode()


def test_kcat_consumes_over_sasl_ssl_with_plain(certs: TestCertificates) -> None:
    with EmbeddedBroker(
        security_protocol="SASL_SSL",
        ssl_keystore_location=certs.server_keystore,
        sasl_users=USERS,
    ) as tls_broker:
        topic = new_topic(tls_broker, "kcat-ssl")
        records: list[Record] = [(0, None, b"m%d" % i, []) for i in range(20)]
        settings = sasl_settings(tls_broker, "SCRAM-SHA-512", certs=certs)
        assert produce(settings, topic, records) == []
        args = [
            "-C",
            "-b",
            tls_broker.bootstrap_servers,
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
            "security.protocol=SASL_SSL",
            "-X",
            f"ssl.ca.location={certs.ca_cert}",
            "-X",
            "sasl.mechanisms=PLAIN",
            "-X",
            "sasl.username=alice",
            "-X",
            f"sasl.password={PASSWORD}",
        ]
        out = clients.kcat(args, new_librdkafka=True).decode().split()
        assert out == [f"m{i}" for i in range(20)]


def test_cli_runs_a_sasl_broker_with_the_mechanisms_it_is_given() -> None:
    flags = (
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-user",
        "alice:pw:with:colons",
        "--sasl-user",
        "bob:other",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-256",
    )
    with cli_broker(*flags) as (_proc, bootstrap):
        settings = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "pw:with:colons",
        }
        assert produce(settings, "cli-auto", [(-1, b"k", b"v", [])]) == []
        assert consume(settings, "cli-auto", 1, 1) == [(0, b"k", b"v", [])]
        plain = {**settings, "sasl.mechanism": "PLAIN", "message.timeout.ms": 1000, "log_level": 0}
        assert produce(plain, "cli-auto", [(0, None, b"x", [])], flush_s=10)
    result = subprocess.run(
        [sys.executable, "-m", "kclient.broker", "--security-protocol", "SASL_PLAINTEXT"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2 and b"'sasl.users'" in result.stderr


def test_broker_process_reports_the_sasl_listener() -> None:
    flags = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-user", "alice:" + PASSWORD]
    flags += ["--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512"]
    with broker_process(*flags, "--connections-max-reauth-ms", "60000") as process:
        assert process.security_protocol == "SASL_PLAINTEXT"
        assert process.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
        with Raw(process.bootstrap_servers) as raw:  # the flag reached the listener
            assert raw.login("PLAIN")["session_lifetime_ms"] == 60000
        settings = {
            "bootstrap.servers": process.bootstrap_servers,
            "security.protocol": process.security_protocol,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
        }
        assert produce(settings, "process", [(0, None, b"x" * 5000, [])]) == []
        assert consume(settings, "process", 1, 1) == [(0, None, b"x" * 5000, [])]
