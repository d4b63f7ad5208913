"""OAUTHBEARER settings and tokens, client side: which token source the settings choose,
what each one refuses, unsecured JWTs, the refresh schedule (a mock wall clock), and
that secrets show nowhere. No sockets."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from kclient.aio.config import producer_settings
from kclient.config import ProducerConfig
from kclient.errors import ConfigError
from kclient.oauth import OAuthBearerCredentials, OAuthTokenError, TokenSource
from kclient.oauth.oidc import OidcTokenFetcher
from kclient.oauth.token import (
    OAuthBearerMechanism,
    OAuthBearerToken,
    client_first_message,
    jwt_claims,
    unsecured_jwt,
)

SASL = {
    "bootstrap.servers": "127.0.0.1:9092",
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
}


def creds(**settings: Any) -> OAuthBearerCredentials:
    config = ProducerConfig({**SASL, **settings})
    assert isinstance(config.sasl, OAuthBearerCredentials)
    return config.sasl


def test_client_first_message_bytes() -> None:
    assert client_first_message("eyJ.e30.", {}) == b"n,,\x01auth=Bearer eyJ.e30.\x01\x01"
    assert (
        client_first_message("t0k", {"traceId": "7", "logicalCluster": "lkc-1"})
        == b"n,,\x01auth=Bearer t0k\x01traceId=7\x01logicalCluster=lkc-1\x01\x01"
    )


def test_unsecured_jwt_mode_makes_an_unsigned_token_from_sasl_oauthbearer_config() -> None:
    sasl = creds(
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice scope=produce,read lifeSeconds=600 "
            "extension_traceId=7",
        }
    )
    exchange = sasl.new_exchange()
    message = exchange.initial_response()
    assert message.startswith(b"n,,\x01auth=Bearer ") and message.endswith(b"\x01traceId=7\x01\x01")
    token = message.split(b"Bearer ")[1].split(b"\x01")[0].decode()
    header, claims = jwt_claims(token)
    assert header == {"alg": "none"} and token.endswith(".")
    assert claims["sub"] == "alice" and claims["scope"] == ["produce", "read"]
    assert claims["exp"] - claims["iat"] == 600
    assert sasl.username == "alice"


def test_javas_jaas_forms_are_accepted() -> None:
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
    sasl = creds(**{"sasl.jaas.config": f'{module} required unsecuredLoginStringClaim_sub="bob";'})
    sasl.new_exchange()
    assert sasl.username == "bob"
    oidc = creds(
        **{
            "sasl.jaas.config": f'{module} required clientId="app" clientSecret="s3cret";',
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        }
    )
    assert isinstance(oidc.source, TokenSource)
    assert "s3cret" not in repr(oidc) + repr(oidc.source)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({}, "needs a token source: 'oauth_cb'"),
        ({"oauth_cb": print, "enable.sasl.oauthbearer.unsecure.jwt": True}, "keep one"),
        ({"sasl.oauthbearer.method": "oidc"}, "needs 'sasl.oauthbearer.token.endpoint.url'"),
        (
            {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "ftp://x"},
            "needs 'sasl.oauthbearer.client.id'",
        ),
        (
            {
                "sasl.oauthbearer.token.endpoint.url": "ftp://x",
                "sasl.oauthbearer.client.id": "a",
                "sasl.oauthbearer.client.secret": "b",
            },
            "must be an http:// or https:// URL",
        ),
        ({"sasl.oauthbearer.method": "magic"}, "must be 'default' or 'oidc'"),
        ({"enable.sasl.oauthbearer.unsecure.jwt": True}, "needs principal=<name>"),
        (
            {"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal"},
            "'principal' is not name=value",
        ),
        ({"oauth_cb": "not callable"}, "'oauth_cb' must be a callable"),
        ({"oauth_cb": print, "sasl.oauthbearer.extensions": "a b=c"}, "letters only"),
        ({"oauth_cb": print, "sasl.username": "u"}, "'sasl.username' is not used by OAUTHBEARER"),
        (
            {"oauth_cb": print, "sasl.jaas.config": "a.b.PlainLoginModule required;"},
            "does not go with 'sasl.mechanism' OAUTHBEARER",
        ),
        ({"sasl_oauth_token_provider": object()}, "must have a 'token(self) -> str' method"),
    ],
)
def test_bad_settings_are_config_errors_naming_them(settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=None) as failed:
        ProducerConfig({**SASL, **settings})
    assert says in str(failed.value)


def test_oauth_settings_without_sasl_name_the_protocol() -> None:
    with pytest.raises(ConfigError, match="'oauth_cb' given, but 'security.protocol' is PLAINTEXT"):
        ProducerConfig({"bootstrap.servers": "h:1", "oauth_cb": print})


def test_the_client_secret_shows_nowhere() -> None:
    config = ProducerConfig(
        {
            **SASL,
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:9/token",
            "sasl.oauthbearer.client.credentials.client.id": "app",  # Java's name
            "sasl.oauthbearer.client.credentials.client.secret": "hunter2",
        }
    )
    assert "hunter2" not in repr(config) and "[hidden]" in repr(config)
    assert config.sasl_oauthbearer_client_id == "app"
    with pytest.raises(ConfigError) as failed:
        ProducerConfig({**SASL, "sasl.oauthbearer.client.secret": 12345})
    assert "12345" not in str(failed.value)
    fetcher = OidcTokenFetcher("http://127.0.0.1:9/token", "app", "hunter2")
    assert "hunter2" not in repr(fetcher)
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(fetcher)


def test_oauth_cb_gets_sasl_oauthbearer_config_and_its_principal_is_used() -> None:
    seen: list[str] = []

    def oauth_cb(config: str) -> tuple[str, float, str]:
        seen.append(config)
        return "tok.en.x", 4e9, "svc"

    sasl = creds(oauth_cb=oauth_cb, **{"sasl.oauthbearer.config": "audience=kafka"})
    assert sasl.new_exchange().initial_response() == b"n,,\x01auth=Bearer tok.en.x\x01\x01"
    assert seen == ["audience=kafka"] and sasl.username == "svc"


def test_an_oauth_cb_exception_names_the_setting_without_the_token() -> None:
    def oauth_cb(config: str) -> Any:
        raise ValueError("identity provider unreachable")

    with pytest.raises(OAuthTokenError, match="'oauth_cb' raised ValueError: identity provider"):
        creds(oauth_cb=oauth_cb).new_exchange()


class Wall:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms


def test_refresh_is_due_at_80_to_85_percent_of_the_lifetime_with_jitter() -> None:
    dues = set()
    for seed in range(20):
        wall = Wall()
        source = TokenSource(
            "'oauth_cb'",
            lambda now: unsecured_jwt("a", now, lifetime_s=1000),
            wall_ms=wall,
            rng=random.Random(seed),
        )
        source.current()
        delay = source.refresh_delay_ms()
        assert 800_000 <= delay <= 850_000
        dues.add(delay)
    assert len(dues) > 10  # jittered: producers started together do not refresh together


def test_a_failed_refresh_keeps_the_token_and_retries_before_it_expires() -> None:
    wall = Wall()
    calls: list[int] = []

    def fetch(now: int) -> OAuthBearerToken:
        calls.append(now)
        if len(calls) == 2:
            raise OAuthTokenError("'oauth_cb' raised RuntimeError")
        return unsecured_jwt("a", now, lifetime_s=100)

    source = TokenSource("'oauth_cb'", fetch, wall_ms=wall, spawn=lambda target: target())
    first = source.current()
    wall.ms += 90_000
    assert source.current() is first  # the refresh failed in the background: still valid
    assert len(calls) == 2
    assert 0 < source.refresh_delay_ms() <= 10_000
    wall.ms += source.refresh_delay_ms()
    source.maintain(wall())
    assert len(calls) == 3 and source.current() is not first


def test_an_expired_token_is_never_sent() -> None:
    wall = Wall()
    tokens = iter(
        [unsecured_jwt("a", wall.ms, lifetime_s=10), unsecured_jwt("b", wall.ms, lifetime_s=60)]
    )
    source = TokenSource("'oauth_cb'", lambda now: next(tokens), wall_ms=wall, spawn=lambda t: None)
    assert source.current().principal == "a"
    wall.ms += 11_000  # the background refresh never came back: fetched now instead
    assert source.current().principal == "b"


def test_the_mechanism_acknowledges_a_broker_error_and_keeps_its_status() -> None:
    mechanism = OAuthBearerMechanism(unsecured_jwt("a", 0))
    error = json.dumps({"status": "invalid_token", "scope": "produce"}).encode()
    assert mechanism.respond(error) == b"\x01"
    assert mechanism.broker_error == "broker error status 'invalid_token', scope 'produce'"
    assert mechanism.respond(b"") is None


class Provider:
    def __init__(self) -> None:
        self.calls = 0

    async def token(self) -> str:
        self.calls += 1
        return unsecured_jwt("aio", 1_800_000_000_000, lifetime_s=10**9).value

    def extensions(self) -> dict[str, str]:
        return {"traceId": "9"}


def test_aiokafkas_token_provider_keyword_is_taken() -> None:
    provider = Provider()
    settings, _ = producer_settings(
        {
            "bootstrap_servers": "h:1",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": provider,
        }
    )
    config = ProducerConfig(settings)
    assert isinstance(config.sasl, OAuthBearerCredentials)

    async def first_token() -> bytes:
        assert isinstance(config.sasl, OAuthBearerCredentials)
        await config.sasl.source.start()
        return config.sasl.new_exchange().initial_response()

    message = asyncio.run(first_token())
    assert message.endswith(b"\x01traceId=9\x01\x01") and provider.calls == 1
    assert config.sasl.username == "aio"


def test_kafka_pythons_plain_token_provider_works_in_the_sync_producer() -> None:
    class KafkaPythonProvider:
        def token(self) -> str:
            return unsecured_jwt("kp", 1_800_000_000_000, lifetime_s=10**9).value

    sasl = creds(sasl_oauth_token_provider=KafkaPythonProvider())
    assert sasl.new_exchange().initial_response().startswith(b"n,,\x01auth=Bearer ")
    assert sasl.username == "kp"


def test_a_nearly_expired_token_is_replaced_now_when_the_background_refresh_is_late() -> None:
    wall = Wall()
    principals = iter(["first", "second"])
    source = TokenSource(
        "'oauth_cb'",
        lambda now: unsecured_jwt(next(principals), now, lifetime_s=100),
        wall_ms=wall,
        spawn=lambda target: None,  # the background refresh never comes back
    )
    assert source.current().principal == "first"
    wall.ms += 89_000
    assert source.current().principal == "first"  # 11 % left: still sent
    wall.ms += 2_000
    assert source.current().principal == "second"  # 9 % left: fetched on this thread


def test_asyncio_never_blocks_its_loop_on_a_blocking_fetcher() -> None:
    """``kclient.aio`` with ``oauth_cb`` / OIDC: ``start()`` gets the first token in a
    worker thread; later, a token that ran out is refreshed in the background, never on
    the loop (the connection fails until it comes, and is retried)."""
    wall = Wall()
    threads: list[str] = []
    spawned: list[Any] = []

    def fetch(now: int) -> OAuthBearerToken:
        import threading

        threads.append(threading.current_thread().name)
        return unsecured_jwt("a", now, lifetime_s=10)

    source = TokenSource("'oauth_cb'", fetch, wall_ms=wall, spawn=spawned.append)

    async def on_the_loop() -> None:
        await source.start()
        assert source.current().principal == "a"
        wall.ms += 11_000  # expired, and no refresh has come back
        with pytest.raises(OAuthTokenError, match="no token from 'oauth_cb' yet"):
            source.current()

    asyncio.run(on_the_loop())
    assert len(threads) == 1 and threads[0] != "MainThread"  # the first: a worker thread
    assert len(spawned) == 1  # the refresh: in the background
    spawned[0]()
    assert source.current().principal == "a" and len(threads) == 2
