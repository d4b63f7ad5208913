"""NetworkClient with SASL/OAUTHBEARER: the client-first message, the token's refresh at
80-85% of its lifetime without touching the connection, re-authentication with the new
token, and the broker's RFC 7628 error. MockClock + MockSelector; the broker is scripted."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from kclient.errors import SaslAuthenticationError
from kclient.network.client import NetworkClient
from kclient.network.config import NetworkClientConfig
from kclient.network.connection_states import ConnectionState
from kclient.network.metadata import Metadata
from kclient.oauth import OAuthBearerCredentials, TokenSource, callback_fetch
from kclient.protocol import ApiKey
from kclient.testing import MockClock, MockSelector, SentRequest, api_versions_body
from kclient.testing.client import metadata_update_with

NODE = -1


class OAuthBroker:
    """Accepts ``Bearer good-*`` tokens; refuses others as Kafka does (JSON challenge,
    then the error once the client sends %x01)."""

    def __init__(self, selector: MockSelector) -> None:
        self.messages: list[bytes] = []
        self.session_lifetime_ms = 0
        selector.serve(
            ApiKey.SASL_HANDSHAKE, lambda r: {"error_code": 0, "mechanisms": ["OAUTHBEARER"]}
        )
        selector.serve(ApiKey.SASL_AUTHENTICATE, self.authenticate)

    def authenticate(self, request: SentRequest) -> dict[str, object]:
        message = bytes(request.body["auth_bytes"])
        self.messages.append(message)
        error = json.dumps({"status": "invalid_token", "scope": "kafka"})
        if message == b"\x01":
            return {
                "error_code": 58,
                "error_message": error,
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            }
        if b"auth=Bearer good-" not in message:
            return {
                "error_code": 0,
                "error_message": None,
                "auth_bytes": error.encode(),
                "session_lifetime_ms": 0,
            }
        return {
            "error_code": 0,
            "error_message": None,
            "auth_bytes": b"",
            "session_lifetime_ms": self.session_lifetime_ms,
        }


class Callback:
    """An ``oauth_cb`` handing out good-1, good-2 ... valid for ``lifetime_s``."""

    def __init__(self, clock: MockClock, lifetime_s: int = 100) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.calls: list[str] = []
        self.result: Callable[[], object] | None = None

    def __call__(self, config: str) -> object:
        self.calls.append(config)
        if self.result is not None:
            return self.result()
        expiry = self.clock.time_ms() / 1000 + self.lifetime_s
        return (f"good-{len(self.calls)}", expiry, "alice", {"traceId": "7"})


def make(
    cb: Callable[[str], object] | None = None,
) -> tuple[MockClock, MockSelector, Metadata, NetworkClient, Callback, OAuthBroker]:
    clock = MockClock()
    callback = Callback(clock)
    fetch_cb = cb or callback

    source = TokenSource(
        "'oauth_cb'",
        callback_fetch(fetch_cb, "cfg"),
        wall_ms=clock.time_ms,
        rng=random.Random(3),
        spawn=lambda target: target(),  # the background refresh, inline
    )
    selector = MockSelector()
    body = api_versions_body(None)
    selector.serve(ApiKey.API_VERSIONS, lambda request: body)
    broker = OAuthBroker(selector)
    metadata = Metadata()
    metadata.bootstrap([("broker", 9092)])
    config = NetworkClientConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl=OAuthBearerCredentials(source, "what 'oauth_cb' returns"),
    )
    client = NetworkClient(
        selector,
        metadata,
        config,
        clock=clock,
        rng=random.Random(1),
        resolver=lambda host, port: [(2, "127.0.0.1", port)],
    )
    return clock, selector, metadata, client, callback, broker


def run(clock: MockClock, client: NetworkClient, polls: int = 8) -> None:
    for _ in range(polls):
        client.poll(0, clock.monotonic_ms())


def answer_metadata(clock: MockClock, selector: MockSelector, client: NetworkClient) -> None:
    selector.respond(NODE, metadata_update_with(1, {}))
    run(clock, client)
    assert not selector.unanswered(NODE)


def test_the_client_first_message_carries_the_token_and_its_extensions() -> None:
    clock, selector, _, client, _, broker = make()
    run(clock, client)
    assert selector.requests(NODE, ApiKey.SASL_HANDSHAKE)[0].body["mechanism"] == "OAUTHBEARER"
    assert broker.messages == [b"n,,\x01auth=Bearer good-1\x01traceId=7\x01\x01"]
    assert client.connection_states.state(NODE) is ConnectionState.READY


def test_the_token_is_refreshed_at_80_to_85_percent_of_its_lifetime_on_the_same_connection() -> (
    None
):
    clock, selector, _, client, callback, broker = make()
    run(clock, client)
    answer_metadata(clock, selector, client)
    assert len(callback.calls) == 1
    clock.advance(79_000)
    run(clock, client)
    assert len(callback.calls) == 1  # not yet
    clock.advance(6_001)  # 85 s of 100: due whatever the jitter
    run(clock, client)
    assert len(callback.calls) == 2  # refreshed in the background ...
    assert client.connection_states.state(NODE) is ConnectionState.READY
    assert len(selector.requests(NODE, ApiKey.SASL_HANDSHAKE)) == 1  # ... connection untouched
    assert len(broker.messages) == 1


def test_an_idle_client_wakes_up_for_the_refresh() -> None:
    clock, selector, _, client, _, _ = make()
    run(clock, client)
    client.poll(600_000, clock.monotonic_ms())
    assert selector.poll_timeouts_ms[-1] <= 85_000


def test_reauthentication_sends_the_refreshed_token() -> None:
    clock, selector, _, client, callback, broker = make()
    broker.session_lifetime_ms = 100_000  # the token's lifetime, as Kafka sends it
    run(clock, client)
    answer_metadata(clock, selector, client)
    clock.advance(95_000)  # past the refresh (80-85 %) and the re-authentication (85-95 %)
    run(clock, client, polls=16)
    assert len(selector.requests(NODE, ApiKey.SASL_HANDSHAKE)) == 2
    assert broker.messages[-1] == b"n,,\x01auth=Bearer good-2\x01traceId=7\x01\x01"
    assert client.connection_states.state(NODE) is ConnectionState.READY
    assert selector.is_connected(NODE)  # the same connection
    assert len(callback.calls) == 2


def test_a_refused_token_fails_with_the_brokers_json_status_and_the_setting() -> None:
    clock, _selector, metadata, client, callback, broker = make()
    callback.result = lambda: ("bad-token", clock.time_ms() / 1000 + 100)
    run(clock, client)
    assert broker.messages[-1] == b"\x01"  # RFC 7628: the client acknowledges the error
    assert client.connection_states.state(NODE) is ConnectionState.AUTHENTICATION_FAILED
    with pytest.raises(SaslAuthenticationError) as failed:
        metadata.maybe_raise_for_topic("t")
    text = str(failed.value)
    assert "invalid_token" in text
    assert "check what 'oauth_cb' returns" in text
    assert "bad-token" not in text  # the token is a secret


@pytest.mark.parametrize(
    ("result", "says"),
    [
        ("just-a-token", "must return (token, expiry_seconds_since_epoch"),
        (("tok", "tomorrow"), "expiry of type str"),
        (("", 2e9), "empty token"),
        (("has spaces", 2e9), "characters a bearer token cannot have"),
        (("x" * (1024 * 1024), 2e9), "more than the 262144"),
        (("tok", 1.0), "expired"),
        (("tok", 2e9, "alice", {"auth": "x"}), "reserved"),
    ],
)
def test_a_callback_returning_garbage_is_a_clear_error_naming_it(result: object, says: str) -> None:
    clock, _selector, metadata, client, callback, broker = make()
    callback.result = lambda: result
    run(clock, client)
    assert broker.messages == []  # nothing was sent
    with pytest.raises(SaslAuthenticationError, match="'oauth_cb'") as failed:
        metadata.maybe_raise_for_topic("t")
    assert says in str(failed.value)


def test_a_callback_that_raises_is_reported_and_retried_after_backoff() -> None:
    clock, _selector, metadata, client, callback, _broker = make()

    def boom() -> object:
        raise RuntimeError("idp down")

    callback.result = boom
    run(clock, client)
    with pytest.raises(SaslAuthenticationError, match="'oauth_cb' raised RuntimeError: idp down"):
        metadata.maybe_raise_for_topic("t")
    callback.result = None
    clock.advance(2_000)  # past the reconnect backoff
    run(clock, client, polls=16)
    assert client.connection_states.state(NODE) is ConnectionState.READY
