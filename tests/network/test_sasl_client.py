"""NetworkClient SASL: after ApiVersions, SaslHandshake then SaslAuthenticate rounds, and
only then READY. MockClock + MockSelector; the broker's side is scripted here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import random

import pytest

from kclient.errors import SaslAuthenticationError
from kclient.network.client import NetworkClient
from kclient.network.config import NetworkClientConfig
from kclient.network.connection_states import ConnectionState
from kclient.network.metadata import Metadata
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.sasl import SaslCredentials, ScramMechanism
from kclient.testing import MockClock, MockSelector, SentRequest, api_versions_body
from kclient.testing.client import metadata_update_with
from kclient.testing.selector import MockSelector as _MockSelector

NODE = -1  # the bootstrap node


class Broker:
    """A SASL broker's answers: PLAIN, or SCRAM-SHA-256 with one user (RFC 5802 server)."""

    def __init__(
        self, selector: _MockSelector, password: str = "pw", mechanisms=("PLAIN",)
    ) -> None:  # type: ignore[no-untyped-def]
        self.password = password.encode()
        self.mechanisms = list(mechanisms)
        self.session_lifetime_ms = 0
        self.tokens: list[bytes] = []
        self._scram_state: tuple[str, bytes, bytes] | None = None
        selector.serve(ApiKey.SASL_HANDSHAKE, self.handshake)
        selector.serve(ApiKey.SASL_AUTHENTICATE, self.authenticate)

    def handshake(self, request: SentRequest) -> dict[str, object]:
        ok = request.body["mechanism"] in self.mechanisms
        return {"error_code": 0 if ok else 33, "mechanisms": self.mechanisms}

    def authenticate(self, request: SentRequest) -> dict[str, object]:
        token = bytes(request.body["auth_bytes"])
        self.tokens.append(token)
        if token.startswith(b"\x00"):  # PLAIN
            _, _user, password = token.split(b"\x00")
            if password != self.password:
                return self._refuse("Authentication failed: Invalid username or password")
            return self._ok(b"")
        if token.startswith(b"n,,"):  # SCRAM client-first
            bare = token.decode()[3:]
            nonce = dict(p.split("=", 1) for p in bare.split(","))["r"] + "server"
            salt = b"salt"
            first = f"r={nonce},s={base64.b64encode(salt).decode()},i=4096"
            salted = hashlib.pbkdf2_hmac("sha256", self.password, salt, 4096)
            self._scram_state = (bare + "," + first, salted, salt)
            return self._ok(first.encode())
        assert self._scram_state is not None
        so_far, salted, _ = self._scram_state
        without_proof, _, proof = token.decode().rpartition(",p=")
        auth = f"{so_far},{without_proof}".encode()
        stored = hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
        client_key = bytes(
            a ^ b
            for a, b in zip(
                base64.b64decode(proof), hmac.digest(stored, auth, "sha256"), strict=True
            )
        )
        if hashlib.sha256(client_key).digest() != stored:
            return self._refuse(
                "Authentication failed due to invalid credentials with SASL mechanism SCRAM-SHA-256"
            )
        server_key = hmac.digest(salted, b"Server Key", "sha256")
        return self._ok(b"v=" + base64.b64encode(hmac.digest(server_key, auth, "sha256")))

    def _ok(self, token: bytes) -> dict[str, object]:
        return {
            "error_code": 0,
            "error_message": None,
            "auth_bytes": token,
            "session_lifetime_ms": self.session_lifetime_ms,
        }

    @staticmethod
    def _refuse(message: str) -> dict[str, object]:
        return {
            "error_code": 58,
            "error_message": message,
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }


def make(
    mechanism: str = "PLAIN",
    password: str = "pw",
    versions: dict[int, tuple[int, int]] | None = None,
) -> tuple[MockClock, MockSelector, Metadata, NetworkClient]:
    clock = MockClock()
    selector = MockSelector()
    body = api_versions_body(versions)
    selector.serve(ApiKey.API_VERSIONS, lambda request: body)
    metadata = Metadata()
    metadata.bootstrap([("broker", 9092)])
    config = NetworkClientConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl=SaslCredentials(mechanism, "alice", password),
    )
    client = NetworkClient(
        selector,
        metadata,
        config,
        clock=clock,
        rng=random.Random(1),
        resolver=lambda host, port: [(2, "127.0.0.1", port)],
    )
    return clock, selector, metadata, client


def run(clock: MockClock, client: NetworkClient, polls: int = 8) -> None:
    for _ in range(polls):
        client.poll(0, clock.monotonic_ms())


def test_plain_authenticates_before_the_node_is_ready() -> None:
    clock, selector, _, client = make()
    broker = Broker(selector)
    run(clock, client)
    kinds = [r.api_key for r in selector.requests(NODE)]
    assert kinds[:3] == [ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]
    assert selector.requests(NODE, ApiKey.SASL_HANDSHAKE)[0].body["mechanism"] == "PLAIN"
    assert selector.requests(NODE, ApiKey.SASL_HANDSHAKE)[0].api_version == 1
    assert broker.tokens == [b"\x00alice\x00pw"]
    assert client.connection_states.state(NODE) is ConnectionState.READY
    assert ApiKey.METADATA in kinds[3:]  # the metadata request went out only after


def test_scram_runs_two_rounds_and_checks_the_broker() -> None:
    clock, selector, _, client = make("SCRAM-SHA-256")
    broker = Broker(selector, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    run(clock, client)
    assert len(broker.tokens) == 2
    assert broker.tokens[0].startswith(b"n,,n=alice,r=")
    assert client.connection_states.state(NODE) is ConnectionState.READY


def test_nothing_else_is_sent_while_authenticating() -> None:
    clock, selector, _, client = make()
    selector.serve(ApiKey.SASL_HANDSHAKE, lambda r: {"error_code": 0, "mechanisms": ["PLAIN"]})
    # SaslAuthenticate stays unanswered: the node must not become ready meanwhile.
    run(clock, client)
    assert client.connection_states.state(NODE) is ConnectionState.AUTHENTICATING
    assert [r.api_key for r in selector.requests(NODE)] == [
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    ]


def test_wrong_password_fails_sends_with_a_clear_error_until_a_retry_succeeds() -> None:
    clock, selector, metadata, client = make(password="wrong")
    broker = Broker(selector)
    run(clock, client)
    assert client.connection_states.state(NODE) is ConnectionState.AUTHENTICATION_FAILED
    with pytest.raises(SaslAuthenticationError) as failed:
        metadata.maybe_raise_for_topic("t")
    text = str(failed.value)
    assert "authentication as 'alice' with PLAIN failed" in text
    assert "Invalid username or password" in text
    assert "check 'sasl.username' and 'sasl.password'" in text
    assert "no broker reachable" in str(client.no_broker_reachable_error(1000))
    assert "Invalid username or password" in str(client.no_broker_reachable_error(1000))
    # The broker's user database is fixed: after the reconnect backoff it works again.
    broker.password = b"wrong"
    clock.advance(2_000)
    run(clock, client)
    assert client.connection_states.state(NODE) is ConnectionState.READY
    metadata.maybe_raise_for_topic("t")  # cleared


def test_a_mechanism_the_broker_does_not_enable_names_the_ones_it_does() -> None:
    clock, selector, metadata, client = make("SCRAM-SHA-512")
    Broker(selector, mechanisms=("PLAIN", "SCRAM-SHA-256"))
    run(clock, client)
    with pytest.raises(
        SaslAuthenticationError,
        match=r"does not enable SASL mechanism "
        r"SCRAM-SHA-512 \(it enables: PLAIN, SCRAM-SHA-256; error "
        r"UNSUPPORTED_SASL_MECHANISM\): check 'sasl.mechanism'",
    ):
        metadata.maybe_raise_for_topic("t")
    assert not selector.requests(NODE, ApiKey.SASL_AUTHENTICATE)


def test_a_broker_without_sasl_apis_is_refused_without_sending_a_handshake() -> None:
    versions = {k: v for k, v in SUPPORTED_VERSIONS.items() if k != ApiKey.SASL_AUTHENTICATE}
    clock, selector, metadata, client = make(versions=versions)
    run(clock, client)
    with pytest.raises(SaslAuthenticationError, match="is it a SASL listener"):
        metadata.maybe_raise_for_topic("t")
    assert not selector.requests(NODE, ApiKey.SASL_HANDSHAKE)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_the_password_shows_in_no_log_line_request_or_error(
    mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Zq8secretVALUE3141"
    caplog.set_level(logging.DEBUG, logger="kclient")
    clock, selector, metadata, client = make(mechanism, password=secret)
    selector.serve(ApiKey.SASL_HANDSHAKE, lambda r: {"error_code": 0, "mechanisms": [mechanism]})
    run(clock, client)  # the first token waits for its answer
    shown = [repr(request) for request in client.in_flight_requests]
    shown += [repr(request.request) for request in client.in_flight_requests]
    selector.respond(NODE, Broker._refuse("Authentication failed: Invalid username or password"))
    run(clock, client)
    with pytest.raises(SaslAuthenticationError) as failed:
        metadata.maybe_raise_for_topic("t")
    shown += [str(failed.value), repr(failed.value), repr(client.config)]
    shown += [record.getMessage() for record in caplog.records]
    assert any("SASL_AUTHENTICATE" in text for text in shown)  # the token request was seen
    assert not [text for text in shown if secret in text]


def _scram_first(server_first: str) -> SaslAuthenticationError:
    exchange = ScramMechanism("SCRAM-SHA-256", "alice", "pw", nonce="abc")
    exchange.initial_response()
    with pytest.raises(SaslAuthenticationError) as refused:
        exchange.respond(server_first.encode())
    return refused.value


def test_a_broker_asking_for_endless_scram_iterations_is_refused_before_hashing() -> None:
    for count in ("16385", "4000000000", "9" * 5000):
        error = _scram_first(f"r=abcdef,s=c2FsdA==,i={count}")
        assert "more than 16384" in str(error)
        assert len(str(error)) < 400  # the broker's text is cut short
    error = _scram_first("r=abcdef,s=c2FsdA==,i=4095")
    assert "fewer than 4096" in str(error)


@pytest.mark.parametrize(
    "server_first",
    ["r=abcdef,s=c2FsdA==,i=\u00b2", "r=abcdef,s=%%%,i=4096"],
    ids=["a digit that is not ASCII", "a salt that is not base64"],
)
def test_a_malformed_scram_server_first_is_an_authentication_error(server_first: str) -> None:
    assert "malformed server-first message" in str(_scram_first(server_first))


def test_a_broker_error_message_of_a_megabyte_is_cut_short_in_the_error() -> None:
    clock, selector, metadata, client = make()
    selector.serve(ApiKey.SASL_HANDSHAKE, lambda r: {"error_code": 0, "mechanisms": ["PLAIN"]})
    selector.serve(ApiKey.SASL_AUTHENTICATE, lambda r: Broker._refuse("x" * 1_000_000))
    run(clock, client)
    with pytest.raises(SaslAuthenticationError) as failed:
        metadata.maybe_raise_for_topic("t")
    assert "(1000000 chars)" in str(failed.value)
    assert len(str(failed.value)) < 1000


# ---- re-authentication (KIP-368) -----------------------------------------------------------


def answer_metadata(clock: MockClock, selector: MockSelector, client: NetworkClient) -> None:
    """Answer the metadata request that went out after authenticating, as a broker would
    before anything sent later on the connection."""
    selector.respond(NODE, metadata_update_with(1, {}))
    run(clock, client)
    assert not selector.unanswered(NODE)


def test_a_session_with_a_lifetime_is_renewed_at_85_to_95_percent_of_it() -> None:
    clock, selector, _, client = make("SCRAM-SHA-256")
    broker = Broker(selector, mechanisms=("SCRAM-SHA-256",))
    broker.session_lifetime_ms = 10_000
    run(clock, client)
    answer_metadata(clock, selector, client)
    assert client.connection_states.state(NODE) is ConnectionState.READY
    clock.advance(8_499)
    run(clock, client)
    assert len(selector.requests(NODE, ApiKey.SASL_HANDSHAKE)) == 1  # not yet
    clock.advance(1_001)  # 9,500 ms: due whatever the jitter
    client.poll(0, clock.monotonic_ms())
    # no new request goes out on the connection until it has re-authenticated
    assert client.connection_states.state(NODE) is ConnectionState.AUTHENTICATING
    assert not client.can_send_request(NODE, clock.monotonic_ms())
    run(clock, client)
    assert len(selector.requests(NODE, ApiKey.SASL_HANDSHAKE)) == 2
    assert len(broker.tokens) == 4  # two SCRAM rounds, twice: the same connection
    assert client.connection_states.state(NODE) is ConnectionState.READY
    assert client.can_send_request(NODE, clock.monotonic_ms())
    assert selector.is_connected(NODE)
    clock.advance(9_500)  # the renewed session is renewed again
    run(clock, client)
    assert len(selector.requests(NODE, ApiKey.SASL_HANDSHAKE)) == 3


def test_an_idle_client_wakes_up_to_renew_its_session() -> None:
    clock, selector, _, client = make()
    Broker(selector).session_lifetime_ms = 10_000
    run(clock, client)
    client.poll(60_000, clock.monotonic_ms())
    assert selector.poll_timeouts_ms[-1] <= 9_500


def test_no_lifetime_means_no_reauthentication() -> None:
    clock, selector, _, client = make()
    Broker(selector)  # session_lifetime_ms 0: the broker does not expire sessions
    run(clock, client)
    answer_metadata(clock, selector, client)
    clock.advance(10_000_000)
    run(clock, client)
    assert len(selector.requests(NODE, ApiKey.SASL_HANDSHAKE)) == 1
    assert client.connection_states.state(NODE) is ConnectionState.READY


def test_a_refused_reauthentication_closes_the_connection_with_the_reason() -> None:
    clock, selector, metadata, client = make()
    broker = Broker(selector)
    broker.session_lifetime_ms = 10_000
    run(clock, client)
    answer_metadata(clock, selector, client)
    broker.password = b"changed"  # the user's password changed on the broker meanwhile
    clock.advance(9_500)
    run(clock, client)
    assert client.connection_states.state(NODE) is ConnectionState.AUTHENTICATION_FAILED
    assert not selector.is_connected(NODE)
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        metadata.maybe_raise_for_topic("t")
