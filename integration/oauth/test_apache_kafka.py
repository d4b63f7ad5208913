"""OAUTHBEARER against Apache Kafka 4.4 itself (the judge): its unsecured validator, and
OIDC with its ``OAuthBearerValidatorCallbackHandler`` checking RS256 tokens of a local
identity provider (token endpoint + JWKS served by the test on 127.0.0.1). kclient (sync
and asyncio) and confluent-kafka produce; confluent-kafka reads back. Refused tokens come
back as Kafka's JSON status, in a typed error naming the setting."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest

from integration.oauth.idp import CLIENT_ID, CLIENT_SECRET, LocalIdp, SigningKey
from integration.producer.verify import consume_all
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.errors import SaslAuthenticationError
from kclient.oauth import unsecured_jwt
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka

_topics = itertools.count()


def topic(kafka: ApacheKafka) -> str:
    name = f"oauth-{next(_topics)}"
    kafka.create_topic(name, 2)
    return name


@pytest.fixture(scope="module")
def kafka() -> Iterator[ApacheKafka]:
    # sessions end with their token (or after a minute): clients must re-authenticate
    properties = {"connections.max.reauth.ms": 60_000}
    with ApacheKafka(VERSIONS[0], listeners=("OAUTHBEARER",), properties=properties) as running:
        yield running


@pytest.fixture(scope="module")
def idp() -> Iterator[LocalIdp]:
    with LocalIdp() as running:
        yield running


@pytest.fixture(scope="module")
def kafka_oidc(idp: LocalIdp) -> Iterator[ApacheKafka]:
    properties = {
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": idp.audience,
        "sasl.oauthbearer.expected.issuer": idp.issuer,
    }
    with ApacheKafka(VERSIONS[0], listeners=("OAUTHBEARER",), properties=properties) as running:
        yield running


def read_back(kafka: ApacheKafka, name: str, expected: int) -> list[bytes]:
    got = consume_all(kafka.bootstrap_servers, name, 2, expected)
    return sorted(c.value or b"" for c in got)


def test_kclient_with_unsecured_jwts(kafka: ApacheKafka) -> None:
    name = topic(kafka)
    config = {**kafka.client_config("OAUTHBEARER"), "sasl.oauthbearer.extensions": "traceId=1"}
    with KafkaProducer(config) as producer:
        for i in range(20):
            producer.send(name, f"k{i}".encode(), key=str(i).encode())
        producer.flush(60)
    assert read_back(kafka, name, 20) == sorted(f"k{i}".encode() for i in range(20))


def test_kclient_reauthenticates_with_refreshed_tokens(
    kafka: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """Tokens of 6 s against Kafka's KIP-368 sessions: kclient refreshes each token at
    80-85 % and re-authenticates its connection before Kafka would close it; sends go on
    for 14 s (two refreshes) and every one succeeds."""
    issued: list[float] = []

    def oauth_cb(config: str) -> tuple[str, float]:
        now_ms = int(time.time() * 1000)
        issued.append(now_ms / 1000)
        return unsecured_jwt("alice", now_ms, lifetime_s=6).value, now_ms / 1000 + 6

    name = topic(kafka)
    config = {
        "bootstrap.servers": kafka.bootstrap("OAUTHBEARER"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }
    caplog.set_level(logging.DEBUG, logger="kclient.network")
    with KafkaProducer(config) as producer:
        futures = []
        deadline = time.monotonic() + 14
        while time.monotonic() < deadline:
            futures.append(producer.send(name, b"r", partition=0))
            time.sleep(0.05)
        producer.flush(60)
        assert [f.exception(0) for f in futures] == [None] * len(futures)
    assert len(issued) >= 3
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("kclient.network")]
    assert sum("re-authenticating to node" in m for m in messages) >= 2
    assert not [m for m in messages if "disconnected" in m]  # the same connections throughout
    assert len(read_back(kafka, name, len(futures))) == len(futures)


def test_kclient_asyncio_with_a_token_provider(kafka: ApacheKafka) -> None:
    class Provider:
        async def token(self) -> str:
            return unsecured_jwt("alice", int(time.time() * 1000)).value

    name = topic(kafka)

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap("OAUTHBEARER"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Provider(),
        )
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(name, f"a{i}".encode(), partition=i % 2)
        finally:
            await producer.stop()

    asyncio.run(main())
    assert read_back(kafka, name, 5) == [f"a{i}".encode() for i in range(5)]


def test_confluent_kafka_unsecured_jwt_and_oauth_cb(kafka: ApacheKafka) -> None:
    name = topic(kafka)
    unsecured = confluent_kafka.Producer(kafka.client_config("OAUTHBEARER"))
    unsecured.produce(name, b"librdkafka unsecured", partition=0)
    assert unsecured.flush(60) == 0

    def oauth_cb(config: str) -> tuple[str, float]:
        now_ms = int(time.time() * 1000)
        return unsecured_jwt("carol", now_ms).value, now_ms / 1000 + 3600

    bootstrap = kafka.bootstrap("OAUTHBEARER")
    with_cb = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
        }
    )
    with_cb.produce(name, b"librdkafka oauth_cb", partition=1)
    assert with_cb.flush(60) == 0
    assert read_back(kafka, name, 2) == [b"librdkafka oauth_cb", b"librdkafka unsecured"]


def test_an_expired_token_gets_kafkas_json_status(kafka: ApacheKafka) -> None:
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    claims = {"sub": "alice", "iat": int(time.time()) - 120, "exp": int(time.time()) - 60}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    expired = f"{header}.{body}."
    config = {
        "bootstrap.servers": kafka.bootstrap("OAUTHBEARER"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda config: (expired, time.time() + 3600),
        "max.block.ms": 10_000,
    }
    started = time.monotonic()
    with KafkaProducer(config) as producer, pytest.raises(SaslAuthenticationError) as failed:
        producer.send(topic(kafka), b"never").result(30)
    assert time.monotonic() - started < 20
    text = str(failed.value)
    assert "invalid_token" in text and "check what 'oauth_cb' returns" in text
    assert expired not in text


def oidc(kafka: ApacheKafka, idp: LocalIdp) -> dict[str, Any]:
    return {
        "bootstrap.servers": kafka.bootstrap("OAUTHBEARER"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        "sasl.oauthbearer.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        "sasl.oauthbearer.scope": "kafka",
    }


def test_kclient_and_confluent_kafka_with_oidc(kafka_oidc: ApacheKafka, idp: LocalIdp) -> None:
    name = topic(kafka_oidc)
    with KafkaProducer(oidc(kafka_oidc, idp)) as producer:
        producer.send(name, b"kclient oidc", partition=0).result(60)
    librdkafka = confluent_kafka.Producer(oidc(kafka_oidc, idp))
    librdkafka.produce(name, b"librdkafka oidc", partition=1)
    assert librdkafka.flush(60) == 0
    assert read_back(kafka_oidc, name, 2) == [b"kclient oidc", b"librdkafka oidc"]


def test_signed_tokens_kafka_refuses(kafka_oidc: ApacheKafka, idp: LocalIdp) -> None:
    for token in (idp.token(aud="someone-else"), idp.token(key=SigningKey("key-1"))):
        config = {
            "bootstrap.servers": kafka_oidc.bootstrap("OAUTHBEARER"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda config, token=token: (token, time.time() + 3600),
            "max.block.ms": 10_000,
        }
        with (
            KafkaProducer(config) as producer,
            pytest.raises(SaslAuthenticationError, match="invalid_token"),
        ):
            producer.send(topic(kafka_oidc), b"never").result(30)
