"""SASL re-authentication (KIP-368) on the embedded broker, without sockets: the session's
lifetime in SaslAuthenticate, its expiry on a mock clock, re-authentication renewing it,
another user or mechanism refused, and ``connections.max.reauth.ms`` as a setting."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.broker.__main__ import build_parser, main
from kclient.broker.config import BrokerConfig
from kclient.broker.sasl_server import PLAIN_REFUSED, SaslServer
from kclient.broker.sasl_session import SaslReply, SaslSession
from kclient.errors import ConfigError
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_response
from kclient.sasl import ScramMechanism
from kclient.testing import MockClock

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USERS = {"alice": "s3cret", "bob": "b0b"}
LIFETIME_MS = 1000
FAILED = errors.SaslAuthenticationFailedError.code


def new_session(lifetime_ms: int = LIFETIME_MS, mechanisms: tuple[str, ...] = MECHS) -> SaslSession:
    return SaslSession(SaslServer(mechanisms, USERS, connections_max_reauth_ms=lifetime_ms))


def plain(user: str = "alice", password: str | None = None) -> bytes:
    return f"\0{user}\0{USERS[user] if password is None else password}".encode()


def login(
    s: SaslSession, clock: MockClock, mechanism: str = "PLAIN", user: str = "alice"
) -> SaslReply:
    """A whole exchange (first authentication or re-authentication); the last reply."""
    assert s.handshake(1, mechanism).body["error_code"] == 0
    if mechanism == "PLAIN":
        return s.authenticate(plain(user), clock.monotonic_ns())
    client = ScramMechanism(mechanism, user, USERS[user])
    first = s.authenticate(client.initial_response(), clock.monotonic_ns())
    assert first.body["error_code"] == 0 and not first.authenticated
    assert first.body["session_lifetime_ms"] == 0  # only the completing round has it
    final = client.respond(first.body["auth_bytes"])
    assert final is not None
    last = s.authenticate(final, clock.monotonic_ns())
    if last.authenticated:
        assert client.respond(last.body["auth_bytes"]) is None  # the server signature verifies
    return last


# ---- the session's lifetime -----------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHS)
def test_a_successful_authentication_carries_the_lifetime(mechanism: str) -> None:
    clock = MockClock()
    s = new_session()
    reply = login(s, clock, mechanism)
    assert reply.authenticated and not reply.reauthenticated and not reply.close
    assert reply.body["error_code"] == 0
    assert reply.body["session_lifetime_ms"] == LIFETIME_MS
    assert s.expires and s.authenticated
    assert s.expiry_ns == clock.monotonic_ns() + LIFETIME_MS * 1_000_000


def test_the_session_expires_after_its_lifetime() -> None:
    clock = MockClock()
    s = new_session()
    login(s, clock)
    clock.advance(LIFETIME_MS - 1)
    assert not s.expired(clock.monotonic_ns())
    assert s.admits(ApiKey.METADATA, clock.monotonic_ns())
    assert s.admits(ApiKey.PRODUCE, clock.monotonic_ns())
    clock.advance(1)
    now = clock.monotonic_ns()
    assert s.expired(now)
    assert not s.admits(ApiKey.METADATA, now)
    assert not s.admits(ApiKey.PRODUCE, now)
    assert not s.admits(ApiKey.SASL_AUTHENTICATE, now)  # re-authentication starts with a handshake
    assert s.admits(ApiKey.SASL_HANDSHAKE, now)
    assert s.admits(ApiKey.API_VERSIONS, now)


def test_without_connections_max_reauth_ms_sessions_never_expire() -> None:
    clock = MockClock()
    s = new_session(lifetime_ms=0)
    reply = login(s, clock)
    assert reply.authenticated and reply.body["session_lifetime_ms"] == 0
    assert not s.expires and s.expiry_ns == 0
    clock.advance(10**9)
    assert s.admits(ApiKey.PRODUCE, clock.monotonic_ns())
    # no re-authentication either (the Processor drops such a session; if it were asked)
    again = s.handshake(1, "PLAIN")
    assert again.close and again.body["error_code"] == errors.IllegalSaslStateError.code
    assert again.failure is not None and "connections.max.reauth.ms is 0" in again.failure


def test_sasl_authenticate_v0_has_no_lifetime_and_v1_has() -> None:
    reply = login(new_session(), MockClock())

    def encoded(version: int) -> dict[str, Any]:
        buffers = encode_response(ApiKey.SASL_AUTHENTICATE, version, 9, reply.body)
        frame = b"".join(bytes(b) for b in buffers)[4:]
        correlation_id, body = decode_response(ApiKey.SASL_AUTHENTICATE, version, frame)
        assert correlation_id == 9
        return body

    assert "session_lifetime_ms" not in encoded(0)
    assert encoded(1)["session_lifetime_ms"] == LIFETIME_MS
    assert encoded(2)["session_lifetime_ms"] == LIFETIME_MS


# ---- re-authentication -------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHS)
def test_re_authentication_renews_the_session(mechanism: str) -> None:
    clock = MockClock()
    s = new_session()
    login(s, clock, mechanism)
    first_expiry = s.expiry_ns
    clock.advance(900)  # librdkafka re-authenticates at 90% of the lifetime
    reply = login(s, clock, mechanism)
    assert s.reauthenticating
    assert reply.authenticated and reply.reauthenticated and not reply.close
    assert reply.body["error_code"] == 0 and reply.body["session_lifetime_ms"] == LIFETIME_MS
    assert s.expiry_ns == clock.monotonic_ns() + LIFETIME_MS * 1_000_000 > first_expiry
    clock.advance(500)  # past the first session's end, within the renewed one
    assert s.admits(ApiKey.PRODUCE, clock.monotonic_ns())
    clock.advance(500)
    assert not s.admits(ApiKey.PRODUCE, clock.monotonic_ns())


def test_an_expired_session_may_still_re_authenticate_and_again() -> None:
    clock = MockClock()
    s = new_session()
    login(s, clock)
    for _ in range(3):
        clock.advance(5 * LIFETIME_MS)
        assert not s.admits(ApiKey.METADATA, clock.monotonic_ns())
        assert login(s, clock).reauthenticated
        assert s.admits(ApiKey.METADATA, clock.monotonic_ns())


def test_re_authentication_as_another_user_is_refused() -> None:
    clock = MockClock()
    s = new_session()
    login(s, clock, "SCRAM-SHA-256", user="alice")
    clock.advance(900)
    reply = login(s, clock, "SCRAM-SHA-256", user="bob")  # bob's right password
    assert not reply.authenticated and reply.close and s.failed
    assert reply.body["error_code"] == FAILED
    assert reply.body["error_message"] == (
        "Re-authentication failed: the user cannot change from alice to bob"
    )
    assert reply.body["auth_bytes"] == b""  # no server signature for bob
    assert reply.failure is not None
    assert "as user 'bob'" in reply.failure and "authenticated as 'alice'" in reply.failure


def test_re_authentication_with_another_mechanism_is_refused() -> None:
    clock = MockClock()
    s = new_session()
    login(s, clock, "SCRAM-SHA-512")
    handshake = s.handshake(1, "PLAIN")  # enabled: the handshake itself succeeds, as in Kafka
    assert handshake.body["error_code"] == 0 and not handshake.close
    reply = s.authenticate(plain(), clock.monotonic_ns())
    assert reply.close and not reply.authenticated and s.failed
    assert reply.body["error_code"] == FAILED
    assert reply.body["error_message"] == (
        "Re-authentication failed: the SASL mechanism cannot change from SCRAM-SHA-512 to PLAIN"
    )
    assert reply.failure is not None and "mechanism PLAIN" in reply.failure


def test_re_authentication_with_a_mechanism_not_enabled_is_refused_at_the_handshake() -> None:
    clock = MockClock()
    s = new_session(mechanisms=("PLAIN",))
    login(s, clock)
    reply = s.handshake(1, "SCRAM-SHA-256")
    assert reply.close and reply.body["error_code"] == errors.UnsupportedSaslMechanismError.code
    assert reply.body["mechanisms"] == ["PLAIN"]


def test_re_authentication_with_a_wrong_password_closes_as_a_first_one_would() -> None:
    clock = MockClock()
    s = new_session()
    login(s, clock)
    assert s.handshake(1, "PLAIN").body["error_code"] == 0
    assert s.in_progress and not s.authenticated
    reply = s.authenticate(plain(password="guess"), clock.monotonic_ns())
    assert reply.close and s.failed and reply.failure == "wrong password"
    assert reply.body == {
        "error_code": FAILED,
        "error_message": PLAIN_REFUSED,
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


def test_re_authentication_with_sasl_handshake_v0_is_refused() -> None:
    s = new_session()
    login(s, MockClock())
    reply = s.handshake(0, "PLAIN")
    assert reply.close and reply.body["error_code"] == errors.UnsupportedVersionError.code


def test_re_authentication_is_one_exchange_at_a_time() -> None:
    s = new_session()
    login(s, MockClock())
    assert s.handshake(1, "PLAIN").body["error_code"] == 0
    assert not s.accepts_api_versions  # mid-exchange
    again = s.handshake(1, "PLAIN")
    assert again.close and again.body["error_code"] == errors.IllegalSaslStateError.code


# ---- the setting ------------------------------------------------------------------------------

SASL: dict[str, Any] = {"security_protocol": "SASL_PLAINTEXT", "sasl_users": {"a": "pw"}}


def test_connections_max_reauth_ms_reaches_the_sasl_server() -> None:
    assert BrokerConfig(**SASL).connections_max_reauth_ms == 0  # Kafka's default: off
    config = BrokerConfig(**SASL, connections_max_reauth_ms=LIFETIME_MS)
    server = config.sasl_server()
    assert server is not None and server.connections_max_reauth_ms == LIFETIME_MS
    assert SaslSession(server).lifetime_ms == LIFETIME_MS


@pytest.mark.parametrize("value", [-1, "1000", 1.5, True, None])
def test_a_bad_connections_max_reauth_ms_names_the_setting(value: object) -> None:
    with pytest.raises(ConfigError, match=r"'connections\.max\.reauth\.ms' must be 0 .* got "):
        BrokerConfig(**SASL, connections_max_reauth_ms=value)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_connections_max_reauth_ms_without_sasl_is_refused(protocol: str) -> None:
    tls = {"ssl_keystore_location": "k.pem"} if protocol == "SSL" else {}
    with pytest.raises(
        ConfigError,
        match=rf"'connections\.max\.reauth\.ms' is set but 'security\.protocol' is {protocol}",
    ):
        BrokerConfig(security_protocol=protocol, connections_max_reauth_ms=1000, **tls)


def test_the_cli_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["--connections-max-reauth-ms", "1000"])
    assert args.connections_max_reauth_ms == 1000
    assert build_parser().parse_args([]).connections_max_reauth_ms is None
    sasl = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-user", "a:pw"]
    assert main([*sasl, "--connections-max-reauth-ms", "-5"]) == 2
    assert "'connections.max.reauth.ms' must be 0" in capsys.readouterr().err
    assert main(["--connections-max-reauth-ms", "1000"]) == 2
    assert "'connections.max.reauth.ms' is set but" in capsys.readouterr().err


def test_sasl_requests_reaching_apis_say_how_re_authentication_works(make_harness: Any) -> None:
    off = make_harness(**SASL)
    auth = off.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b""})
    assert auth["error_code"] == errors.IllegalSaslStateError.code
    assert "connections.max.reauth.ms is 0" in auth["error_message"]
    on = make_harness(**SASL, connections_max_reauth_ms=LIFETIME_MS)
    auth = on.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b""})
    assert auth["error_code"] == errors.IllegalSaslStateError.code
    assert "starts with SaslHandshake" in auth["error_message"]
