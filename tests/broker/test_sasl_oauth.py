"""The embedded broker's OAUTHBEARER: the client-first message, Kafka's unsecured
validator, signed tokens against JWKS keys (RS256, ES256), the RFC 7628 error exchange
and the session that ends with the token. No sockets: JWKS documents are handed in."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from kclient.broker.config import BrokerConfig
from kclient.broker.sasl_oauth import OAuthBearerExchange, TokenRejected, UnsecuredValidator
from kclient.broker.sasl_oauth_jwks import JwksKeys, JwksValidator
from kclient.broker.sasl_server import SaslFailure, SaslServer
from kclient.broker.sasl_session import SaslSession
from kclient.errors import ConfigError

NOW_MS = 1_800_000_000_000
NOW_S = NOW_MS // 1000


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def part(obj: dict[str, Any]) -> str:
    return b64(json.dumps(obj).encode())


def unsigned(**claims: Any) -> str:
    body = {"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S, **claims}
    body = {k: v for k, v in body.items() if v is not None}
    return f"{part({'alg': 'none'})}.{part(body)}."


def first(token: str, extensions: str = "") -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def exchange(validator: Any = None, max_reauth_ms: int = 0) -> OAuthBearerExchange:
    return OAuthBearerExchange(
        validator or UnsecuredValidator(), wall_ms=lambda: NOW_MS, max_reauth_ms=max_reauth_ms
    )


def test_a_valid_unsecured_token_authenticates_as_its_sub_until_it_expires() -> None:
    ex = exchange()
    assert ex.evaluate(first(unsigned(), "traceId=7\x01")) == b""
    assert ex.complete and ex.username == "alice"
    assert ex.extensions == {"traceId": "7"}
    assert ex.session_lifetime_ms == 60_000
    capped = exchange(max_reauth_ms=10_000)
    capped.evaluate(first(unsigned()))
    assert capped.session_lifetime_ms == 10_000  # connections.max.reauth.ms, if sooner


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (unsigned(exp=NOW_S - 5), "expired"),
        (unsigned(exp=None), "no 'exp' claim"),
        (unsigned(sub=None), "no 'sub' claim"),
        (unsigned(iat=NOW_S + 3600), "'iat' is in the future"),
        (f"{part({'alg': 'RS256'})}.{part({'sub': 'a', 'exp': NOW_S + 9})}.c2ln", "is signed"),
        ("garbage", "not a JWT"),
        ("a.b.c", "not a JWT"),
    ],
)
def test_a_bad_token_gets_the_json_error_then_fails_after_the_clients_ack(
    token: str, reason: str
) -> None:
    ex = exchange()
    challenge = ex.evaluate(first(token))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert not ex.complete
    with pytest.raises(SaslFailure) as failed:
        ex.evaluate(b"\x01")
    assert reason in failed.value.reason
    assert json.loads(failed.value.client_message) == {"status": "invalid_token"}


def test_the_required_scope_is_checked_and_named() -> None:
    ex = exchange(UnsecuredValidator(required_scope=["produce"]))
    challenge = ex.evaluate(first(unsigned(scope="read")))
    assert json.loads(challenge) == {"status": "insufficient_scope", "scope": "produce"}
    ok = exchange(UnsecuredValidator(required_scope=["produce"]))
    assert ok.evaluate(first(unsigned(scope=["read", "produce"]))) == b""


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x01\x01",
        b"n,,\x01auth=Bearer\x01\x01",
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01key=value\x01\x01",  # no token
        b"n,,\x01auth=Bearer abc\x01",  # not ended by two %x01
        b"n,,\x01auth=Bearer abc\x01bad-key=1\x01\x01",
        b"n,,\x01auth=Bearer " + b"a" * (1024 * 1024) + b"\x01\x01",  # 1 MiB: not a JWT
        bytes(range(256)) * 64,
    ],
)
def test_malformed_messages_fail_cleanly(message: bytes) -> None:
    ex = exchange()
    try:
        challenge = ex.evaluate(message)
    except SaslFailure as failure:
        assert "malformed" in failure.reason or "no auth" in failure.reason
        return
    assert json.loads(challenge)["status"] == "invalid_token"  # parsed, token refused


def test_an_authorization_id_must_be_the_tokens_principal() -> None:
    ex = exchange()
    message = first(unsigned()).replace(b"n,,", b"n,a=mallory,", 1)
    assert json.loads(ex.evaluate(message))["status"] == "invalid_token"
    ok = exchange()
    assert ok.evaluate(first(unsigned()).replace(b"n,,", b"n,a=alice,", 1)) == b""


def test_a_session_ends_with_its_token_and_may_reauthenticate() -> None:
    server = SaslServer(["OAUTHBEARER"], {})
    session = SaslSession(server)
    assert not session.expires  # connections.max.reauth.ms is 0
    session.handshake(1, "OAUTHBEARER")
    token = unsigned(exp=None)  # replaced below: the real clock decides the lifetime
    import time

    now_s = int(time.time())
    token = unsigned(exp=now_s + 30, iat=now_s)
    reply = session.authenticate(first(token), now_ns=0)
    assert reply.authenticated
    lifetime_ms = reply.body["session_lifetime_ms"]
    assert 25_000 < lifetime_ms <= 30_000
    assert session.expires and session.expired(lifetime_ms * 1_000_000)
    assert not session.expired(lifetime_ms * 1_000_000 - 1)
    # re-authentication with a new token for the same principal
    assert session.handshake(1, "OAUTHBEARER").body["error_code"] == 0
    again = session.authenticate(first(unsigned(exp=now_s + 90, iat=now_s)), now_ns=1)
    assert again.reauthenticated and again.body["session_lifetime_ms"] > 60_000
    # ... but not as someone else
    session.handshake(1, "OAUTHBEARER")
    other = session.authenticate(first(unsigned(sub="bob", exp=now_s + 90, iat=now_s)), 2)
    assert other.close and "cannot change from alice to bob" in other.body["error_message"]


# ---- signed tokens against a JWKS -----------------------------------------------------------


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _int(n: int) -> str:
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def jwk(kid: str, key: Any) -> dict[str, str]:
    numbers = key.public_key().public_numbers()
    if isinstance(key, rsa.RSAPrivateKey):
        return {"kty": "RSA", "kid": kid, "use": "sig", "n": _int(numbers.n), "e": _int(numbers.e)}
    return {"kty": "EC", "crv": "P-256", "kid": kid, "x": _int(numbers.x), "y": _int(numbers.y)}


def signed(kid: str, key: Any, **claims: Any) -> str:
    alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
    body = {"sub": "svc", "exp": NOW_S + 60, "iat": NOW_S, "iss": "idp", "aud": "kafka", **claims}
    signing_input = f"{part({'alg': alg, 'kid': kid})}.{part(body)}".encode()
    if alg == "RS256":
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input.decode()}.{b64(signature)}"


class Jwks:
    def __init__(self, *keys: dict[str, str]) -> None:
        self.keys = list(keys)
        self.downloads = 0

    def __call__(self) -> bytes:
        self.downloads += 1
        return json.dumps({"keys": self.keys}).encode()


def validator(jwks: Jwks, clock: list[int] | None = None) -> JwksValidator:
    ticks = clock if clock is not None else [0]
    keys = JwksKeys(
        "http://idp/jwks",
        download=jwks,
        spawn=lambda target: target(),
        monotonic_ms=lambda: ticks[0],
        refresh_ms=60_000,
    )
    return JwksValidator(keys, expected_audience=["kafka"], expected_issuer="idp")


@pytest.mark.parametrize("key", [RSA_KEY, EC_KEY], ids=["RS256", "ES256"])
def test_signed_tokens_verify_against_the_jwks(key: Any) -> None:
    check = validator(Jwks(jwk("k1", key)))
    assert check.validate(signed("k1", key), NOW_MS).principal == "svc"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (signed("k1", RSA_KEY, aud="other"), "audience"),
        (signed("k1", RSA_KEY, iss="evil"), "issuer"),
        (signed("k1", RSA_KEY, exp=NOW_S - 3600), "expired"),
        (signed("k1", OTHER_KEY), "does not verify"),  # the right kid, the wrong key
        (signed("k9", OTHER_KEY), "does not list"),  # an unknown key
        (unsigned(), "is not one this listener takes"),  # alg none
        (signed("k1", RSA_KEY)[:-4] + "AAAA", "does not verify"),
    ],
)
def test_signed_tokens_that_must_be_refused(token: str, reason: str) -> None:
    check = validator(Jwks(jwk("k1", RSA_KEY)))
    with pytest.raises(TokenRejected, match=reason):
        check.validate(token, NOW_MS)


def test_an_unknown_key_triggers_a_refresh_that_finds_a_rotated_key() -> None:
    ticks = [0]
    jwks = Jwks(jwk("k1", RSA_KEY))
    check = validator(jwks, clock=ticks)
    jwks.keys.append(jwk("k2", EC_KEY))  # the identity provider rotated its keys
    ticks[0] = 1000
    with pytest.raises(TokenRejected, match="does not list"):
        check.validate(signed("k2", EC_KEY), NOW_MS)  # this attempt fails, and refreshes
    assert jwks.downloads == 2
    assert check.validate(signed("k2", EC_KEY), NOW_MS).principal == "svc"


def test_keys_are_refreshed_when_stale() -> None:
    ticks = [0]
    jwks = Jwks(jwk("k1", RSA_KEY))
    check = validator(jwks, clock=ticks)
    check.validate(signed("k1", RSA_KEY), NOW_MS)
    assert jwks.downloads == 1
    ticks[0] = 60_000
    check.validate(signed("k1", RSA_KEY), NOW_MS)
    assert jwks.downloads == 2


def test_an_unreachable_jwks_is_a_config_error_naming_the_flag() -> None:
    def down() -> bytes:
        raise OSError("connection refused")

    with pytest.raises(ConfigError, match="--sasl-oauthbearer-jwks-endpoint-url"):
        JwksKeys("http://127.0.0.1:9/jwks", download=down)
    with pytest.raises(ConfigError, match="not a JWK set"):
        JwksKeys("http://idp/jwks", download=lambda: b"[1, 2]")


def test_broker_config_enables_oauthbearer_without_users_and_checks_its_flags() -> None:
    config = BrokerConfig(security_protocol="SASL_PLAINTEXT", sasl_enabled_mechanisms="OAUTHBEARER")
    server = config.sasl_server()
    assert server is not None and isinstance(server.oauth_validator, UnsecuredValidator)
    with pytest.raises(ConfigError, match="needs 'sasl.oauthbearer.jwks.endpoint.url'"):
        BrokerConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_enabled_mechanisms="OAUTHBEARER",
            sasl_oauthbearer_expected_audience="kafka",
        )
    with pytest.raises(ConfigError, match="OAUTHBEARER is not enabled"):
        BrokerConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_users={"a": "b"},
            sasl_oauthbearer_jwks_endpoint_url="http://idp/jwks",
        )
    with pytest.raises(ConfigError, match="nobody could authenticate with PLAIN"):
        BrokerConfig(
            security_protocol="SASL_PLAINTEXT", sasl_enabled_mechanisms="OAUTHBEARER,PLAIN"
        )


def test_the_cli_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from kclient.broker.__main__ import build_parser, main

    oauth = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-enabled-mechanisms", "OAUTHBEARER"]
    args = build_parser().parse_args(
        [
            *oauth,
            "--sasl-oauthbearer-jwks-endpoint-url",
            "http://idp/jwks",
            "--sasl-oauthbearer-expected-audience",
            "a,b",
            "--sasl-oauthbearer-expected-issuer",
            "i",
        ]
    )
    assert args.sasl_oauthbearer_jwks_endpoint_url == "http://idp/jwks"
    assert args.sasl_oauthbearer_expected_audience == "a,b"
    assert main([*oauth, "--sasl-oauthbearer-expected-audience", "kafka"]) == 2
    assert "needs 'sasl.oauthbearer.jwks.endpoint.url'" in capsys.readouterr().err
    assert main(["--sasl-oauthbearer-required-scope", "produce"]) == 2
    assert "OAUTHBEARER is not enabled" in capsys.readouterr().err
