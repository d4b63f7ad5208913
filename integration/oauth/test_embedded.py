"""SASL/OAUTHBEARER end to end on 127.0.0.1: kclient (sync and asyncio) and confluent-kafka
against the embedded broker, with unsecured JWTs and with OIDC (a local token endpoint and
JWKS served by the test), and what each bad input does: an expired token, a token signed by
an unknown key, a wrong audience, a token endpoint that is down, slow or answers garbage, a
1 MiB token. Every failure is a typed error naming the setting, within the configured
timeouts; the broker keeps serving the others."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from integration.oauth.idp import CLIENT_ID, CLIENT_SECRET, LocalIdp, SigningKey
from integration.producer.verify import consume_all
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedCluster
from kclient.errors import KafkaTimeoutError, SaslAuthenticationError
from kclient.oauth import OAuthTokenError, OidcTokenFetcher, unsecured_jwt
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.testing.tls import write_test_certificates

_topics = itertools.count()
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
UNSECURED = {
    **SASL,
    "enable.sasl.oauthbearer.unsecure.jwt": True,
    "sasl.oauthbearer.config": "principal=alice",
}


def topic(cluster: EmbeddedCluster, partitions: int = 1) -> str:
    name = f"oauth-{next(_topics)}"
    cluster.create_topic(name, partitions)
    return name


@pytest.fixture(scope="module")
def unsecured() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        2, security_protocol="SASL_PLAINTEXT", sasl_enabled_mechanisms="OAUTHBEARER"
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def idp() -> Iterator[LocalIdp]:
    with LocalIdp() as running:
        yield running


@pytest.fixture(scope="module")
def signed(idp: LocalIdp) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        1,
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms="OAUTHBEARER",
        sasl_oauthbearer_jwks_endpoint_url=idp.jwks_url,
        sasl_oauthbearer_expected_audience=idp.audience,
        sasl_oauthbearer_expected_issuer=idp.issuer,
    ) as cluster:
        yield cluster


def oidc_settings(idp: LocalIdp, **more: Any) -> dict[str, Any]:
    return {
        **SASL,
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        "sasl.oauthbearer.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        "sasl.oauthbearer.scope": "kafka",
        **more,
    }


def produce(cluster: EmbeddedCluster, settings: dict[str, Any], count: int = 20) -> str:
    name = topic(cluster, 2)
    with KafkaProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "max.block.ms": 15_000, **settings}
    ) as producer:
        futures = [producer.send(name, f"v{i}".encode(), key=str(i).encode()) for i in range(count)]
        producer.flush(30)
        for future in futures:
            future.result(0)
    return name


def confluent_unsecured() -> dict[str, Any]:
    return {
        **SASL,
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=reader",
    }


# ---- success ------------------------------------------------------------------------------


def test_kclient_unsecured_jwt_and_confluent_reads_back_with_its_own(
    unsecured: EmbeddedCluster,
) -> None:
    name = produce(unsecured, {**UNSECURED, "sasl.oauthbearer.extensions": "traceId=42"}, 50)
    got = consume_all(unsecured.bootstrap_servers, name, 2, 50, settings=confluent_unsecured())
    assert sorted(c.value for c in got) == sorted(f"v{i}".encode() for i in range(50))


def test_kclient_reauthenticates_with_refreshed_tokens_without_losing_a_record(
    unsecured: EmbeddedCluster,
) -> None:
    """Tokens of 4 s: refreshed at 80-85 %, the sessions (as long as the token) renewed
    on the same connections; sends go on throughout and every one succeeds."""
    calls: list[float] = []

    def oauth_cb(config: str) -> tuple[str, float]:
        now_ms = int(time.time() * 1000)
        calls.append(now_ms / 1000)
        return unsecured_jwt("alice", now_ms, lifetime_s=4).value, now_ms / 1000 + 4

    before = sum(m.successful_reauthentications for m in unsecured.metrics())
    killed = sum(m.expired_connections_killed for m in unsecured.metrics())
    name = topic(unsecured, 2)
    settings = {"bootstrap.servers": unsecured.bootstrap_servers, **SASL, "oauth_cb": oauth_cb}
    with KafkaProducer(settings) as producer:
        futures = []
        deadline = time.monotonic() + 9
        while time.monotonic() < deadline:
            futures.append(producer.send(name, b"x"))
            time.sleep(0.02)
        producer.flush(30)
        assert all(f.exception(0) is None for f in futures)
    assert len(calls) >= 3  # the first token and at least two refreshes
    after = unsecured.metrics()
    assert sum(m.successful_reauthentications for m in after) - before >= 2
    assert sum(m.expired_connections_killed for m in after) == killed  # none ran out


def test_the_principal_is_the_tokens_sub_and_quotas_follow_it(unsecured: EmbeddedCluster) -> None:
    """A user quota applies to the token's ``sub``, whatever the client id; alice (another
    sub, no quota) is never throttled."""
    unsecured.set_client_quotas(user="throttled", producer_byte_rate=1000)
    settings = {**UNSECURED, "sasl.oauthbearer.config": "principal=throttled"}
    try:
        produce(unsecured, {**UNSECURED, "client.id": "q2"}, 60)
        name = topic(unsecured)
        producer = KafkaProducer(
            {"bootstrap.servers": unsecured.bootstrap_servers, **settings, "client.id": "q1"}
        )
        try:
            for _ in range(4):  # 40 KB: over 11 windows of 1000 B/s
                producer.send(name, b"y" * 10_000)
            deadline = time.monotonic() + 20
            while not throttled_users(unsecured) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            producer.close(0)  # what is still throttled fails: not the point here
    finally:
        unsecured.set_client_quotas(user="throttled", producer_byte_rate=None)
    assert throttled_users(unsecured) == {"throttled"}


def throttled_users(cluster: EmbeddedCluster) -> set[str | None]:
    return {m.user for m in cluster.quota_metrics() if m.throttle_count > 0}


def test_confluent_kafka_oauth_cb_to_the_embedded_broker(unsecured: EmbeddedCluster) -> None:
    name = topic(unsecured)
    calls: list[str] = []

    def oauth_cb(config: str) -> tuple[str, float]:
        calls.append(config)
        now_ms = int(time.time() * 1000)
        return unsecured_jwt("carol", now_ms).value, now_ms / 1000 + 3600

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": unsecured.bootstrap_servers, **SASL, "oauth_cb": oauth_cb}
    )
    for i in range(10):
        producer.produce(name, f"c{i}".encode())
    assert producer.flush(30) == 0
    assert calls
    got = consume_all(unsecured.bootstrap_servers, name, 1, 10, settings=confluent_unsecured())
    assert [c.value for c in got] == [f"c{i}".encode() for i in range(10)]


def test_aio_producer_with_aiokafkas_token_provider(unsecured: EmbeddedCluster) -> None:
    class Provider:
        calls = 0

        async def token(self) -> str:
            Provider.calls += 1
            await asyncio.sleep(0)
            return unsecured_jwt("dave", int(time.time() * 1000)).value

    name = topic(unsecured)

    async def main() -> int:
        producer = AIOKafkaProducer(
            bootstrap_servers=unsecured.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Provider(),
        )
        await producer.start()
        try:
            metadata = await producer.send_and_wait(name, b"from asyncio")
        finally:
            await producer.stop()
        return metadata.offset

    assert asyncio.run(main()) == 0
    assert Provider.calls >= 1


def test_aio_producer_with_oidc_keeps_its_loop_free(idp: LocalIdp, signed: EmbeddedCluster) -> None:
    """kclient.aio with a blocking token source (OIDC): start() fetches the first token in
    a worker thread; the loop goes on ticking meanwhile."""
    name = topic(signed)
    idp.mode, idp.slow_s = "slow", 0.5
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main() -> int:
        beat = asyncio.create_task(ticker())
        producer = AIOKafkaProducer(
            **oidc_settings(idp), bootstrap_servers=signed.bootstrap_servers
        )
        try:
            await producer.start()
            try:
                return (await producer.send_and_wait(name, b"aio oidc")).offset
            finally:
                await producer.stop()
        finally:
            beat.cancel()

    try:
        assert asyncio.run(main()) == 0
    finally:
        idp.mode = "ok"
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) > 20 and max(gaps) < 0.4  # never stalled for the 0.5 s token fetch


def test_kclient_oidc_against_a_broker_checking_signatures(
    idp: LocalIdp, signed: EmbeddedCluster
) -> None:
    before = len(idp.token_requests)
    name = produce(signed, oidc_settings(idp), 30)
    assert len(idp.token_requests) - before == 1  # one token for both connections
    request = idp.token_requests[-1]
    assert request["form"] == {"grant_type": ["client_credentials"], "scope": ["kafka"]}
    got = consume_all(signed.bootstrap_servers, name, 2, 30, settings=confluent_oidc(idp))
    assert len(got) == 30


def confluent_oidc(idp: LocalIdp) -> dict[str, Any]:
    return {
        **SASL,
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        "sasl.oauthbearer.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        "sasl.oauthbearer.scope": "kafka",
    }


def test_confluent_kafka_oidc_against_the_embedded_broker(
    idp: LocalIdp, signed: EmbeddedCluster
) -> None:
    name = topic(signed)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": signed.bootstrap_servers, **confluent_oidc(idp)}
    )
    producer.produce(name, b"librdkafka oidc")
    assert producer.flush(30) == 0


# ---- bad input ----------------------------------------------------------------------------


def refused(cluster: EmbeddedCluster, settings: dict[str, Any], max_block_ms: int = 5000) -> str:
    """The error a send gets, which must come within max.block.ms (plus a margin)."""
    started = time.monotonic()
    with (
        KafkaProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "max.block.ms": max_block_ms,
                **settings,
            }
        ) as producer,
        pytest.raises((SaslAuthenticationError, KafkaTimeoutError)) as failed,
    ):
        producer.send(topic(cluster), b"never").result(30)
    assert time.monotonic() - started < max_block_ms / 1000 + 5
    assert isinstance(failed.value, SaslAuthenticationError), failed.value
    return str(failed.value)


def cb_returning(token: str) -> Any:
    return lambda config: (token, time.time() + 3600)


def test_an_expired_token_is_refused_with_the_brokers_status(unsecured: EmbeddedCluster) -> None:
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    claims = json.dumps({"sub": "alice", "exp": int(time.time()) - 60}).encode()
    expired = f"{header}.{base64.urlsafe_b64encode(claims).rstrip(b'=').decode()}."
    text = refused(unsecured, {**SASL, "oauth_cb": cb_returning(expired)})
    assert "invalid_token" in text and "check what 'oauth_cb' returns" in text
    assert expired not in text
    assert_still_serving(unsecured)


def test_an_unknown_key_and_a_wrong_audience_are_refused(
    idp: LocalIdp, signed: EmbeddedCluster
) -> None:
    stranger = SigningKey("key-1")  # the same kid, another key
    for token in (
        idp.token(key=stranger),
        idp.token(aud="someone-else"),
        idp.token(key=SigningKey("k9")),
    ):
        text = refused(signed, {**SASL, "oauth_cb": cb_returning(token)})
        assert "invalid_token" in text
    produce(signed, oidc_settings(idp), 1)  # the broker still serves good tokens


def test_a_token_endpoint_that_is_down_fails_naming_the_setting_within_the_backoff() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings = {
        **SASL,
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": f"http://127.0.0.1:{port}/token",
        "sasl.oauthbearer.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        "sasl.login.retry.backoff.max.ms": 1000,
    }
    with EmbeddedCluster(
        1, security_protocol="SASL_PLAINTEXT", sasl_enabled_mechanisms="OAUTHBEARER"
    ) as cluster:
        text = refused(cluster, settings)
    assert "'sasl.oauthbearer.token.endpoint.url'" in text and "cannot connect" in text
    assert CLIENT_SECRET not in text


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("slow", "timed out"),
        ("garbage", "not a JSON object with an 'access_token'"),
        ("error", "HTTP 500"),
        ("refuse", "check 'sasl.oauthbearer.client.id', 'sasl.oauthbearer.client.secret'"),
    ],
)
def test_a_misbehaving_token_endpoint_is_a_clear_error(
    signed: EmbeddedCluster, mode: str, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kclient")
    with LocalIdp() as bad:
        bad.mode = mode
        settings = oidc_settings(
            bad,
            **{"sasl.login.read.timeout.ms": 500, "sasl.login.retry.backoff.max.ms": 300},
        )
        started = time.monotonic()
        text = refused(signed, settings)
        assert time.monotonic() - started < 15
        if mode in ("slow", "error"):  # retried after 100 ms and 200 ms: 3 attempts
            assert len(bad.token_requests) >= 3
    assert says in text and CLIENT_SECRET not in text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "OIDC token endpoint" in logged  # the failure is logged ...
    assert CLIENT_SECRET not in logged  # ... the secret never


def test_a_megabyte_token_is_refused_by_the_client_and_a_raw_one_by_the_broker(
    unsecured: EmbeddedCluster,
) -> None:
    text = refused(unsecured, {**SASL, "oauth_cb": cb_returning("a" * (1024 * 1024))})
    assert "'oauth_cb' returned a token of 1048576 characters" in text
    host, port = unsecured.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        handshake = encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "raw", {"mechanism": "OAUTHBEARER"})
        raw.sendall(b"".join(handshake))
        (size,) = struct.unpack(">i", raw.recv(4))
        assert decode_response(ApiKey.SASL_HANDSHAKE, 1, raw.recv(size))[1]["error_code"] == 0
        token = b"n,,\x01auth=Bearer " + b"a" * (1024 * 1024) + b"\x01\x01"
        frame = encode_request(ApiKey.SASL_AUTHENTICATE, 2, 2, "raw", {"auth_bytes": token})
        try:
            raw.sendall(b"".join(frame))
            closed = raw.recv(4) == b""
        except ConnectionError:
            closed = True
        assert closed  # over sasl.server.max.receive.size: the connection is closed
    assert_still_serving(unsecured)


def assert_still_serving(cluster: EmbeddedCluster) -> None:
    produce(cluster, UNSECURED, 1)


def test_a_session_past_its_tokens_expiry_is_closed_at_its_next_request(
    unsecured: EmbeddedCluster,
) -> None:
    """A client that does not re-authenticate (KIP-368): the session lasts as long as its
    token; then anything but ApiVersions and SaslHandshake closes the connection."""
    killed = sum(m.expired_connections_killed for m in unsecured.metrics())
    host, port = unsecured.bootstrap_servers.split(",")[0].rsplit(":", 1)
    correlation = itertools.count(1)

    def call(sock: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> Any:
        sock.sendall(b"".join(encode_request(api_key, version, next(correlation), "raw", body)))
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        return decode_response(api_key, version, sock.recv(size, socket.MSG_WAITALL))[1]

    with socket.create_connection((host, int(port)), timeout=10) as raw:
        assert call(raw, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
        token = unsecured_jwt("eve", int(time.time() * 1000), lifetime_s=2).value
        message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
        done = call(raw, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": message})
        assert done["error_code"] == 0
        assert 1000 < done["session_lifetime_ms"] <= 2000  # the token's remaining life
        assert call(raw, ApiKey.METADATA, 12, {"topics": []})["brokers"]
        time.sleep(done["session_lifetime_ms"] / 1000 + 0.2)
        raw.sendall(b"".join(encode_request(ApiKey.METADATA, 12, 99, "raw", {"topics": []})))
        try:
            closed = raw.recv(4) == b""
        except ConnectionError:
            closed = True
        assert closed
    assert sum(m.expired_connections_killed for m in unsecured.metrics()) == killed + 1
    assert_still_serving(unsecured)


def test_oidc_over_https_trusts_what_the_producer_trusts(tmp_path: Path) -> None:
    """An https token endpoint and JWKS with a private CA: the producer checks the endpoint
    with its ``ssl.truststore.location`` (the one its SASL_SSL connections use), the broker
    the JWKS with its own; without the CA the error says the certificate is not trusted."""
    certs = write_test_certificates(tmp_path)
    with (
        LocalIdp(certs=certs) as idp,
        EmbeddedCluster(
            1,
            security_protocol="SASL_SSL",
            ssl_keystore_location=certs.server_keystore,
            ssl_truststore_location=certs.ca_cert,
            sasl_enabled_mechanisms="OAUTHBEARER",
            sasl_oauthbearer_jwks_endpoint_url=idp.jwks_url,
            sasl_oauthbearer_expected_audience=idp.audience,
        ) as cluster,
    ):
        assert idp.token_url.startswith("https://")
        tls = {"security.protocol": "SASL_SSL", "ssl.truststore.location": certs.ca_cert}
        produce(cluster, {**oidc_settings(idp), **tls}, 3)
        untrusted = OidcTokenFetcher(  # the system's CAs only
            idp.token_url, CLIENT_ID, CLIENT_SECRET, retry_backoff_max_ms=200
        )
        with pytest.raises(OAuthTokenError) as failed:
            untrusted(int(time.time() * 1000))
    text = str(failed.value)
    assert "'sasl.oauthbearer.token.endpoint.url'" in text and "CERTIFICATE_VERIFY_FAILED" in text
