"""OAUTHBEARER tokens, client side: Kafka's ``OAuthBearerToken``, ``OAuthBearerSaslClient``
and the unsecured JWTs of ``OAuthBearerUnsecuredLoginCallbackHandler`` (KIP-255, KIP-342).

Sans-I/O and thread-free. ``OAuthBearerToken`` is what a token provider hands over (the
compact token, when it expires, the principal and SASL extensions); ``token_from_callback``
checks what a user's ``oauth_cb`` returned; ``unsecured_jwt`` builds the unsigned
(``alg: none``) tokens of librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt``;
``OAuthBearerMechanism`` is one SASL exchange (RFC 7628): the client-first message
``n,,\\x01auth=Bearer <token>\\x01k=v\\x01\\x01``, then, if the broker answers with its
JSON error instead of success, the ``\\x01`` that ends the exchange, and the broker's error
status kept for the error the user sees. Tokens are secrets: never in a repr or an error.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kclient.errors import SaslAuthenticationError
from kclient.protocol import jwt

__all__ = [
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "OAuthTokenError",
    "client_first_message",
    "jwt_claims",
    "parse_extensions",
    "parse_oauthbearer_config",
    "token_from_callback",
    "unsecured_jwt",
]

#: RFC 6750 b64token: the characters a bearer token may have (Kafka checks the same).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: RFC 7628: an extension key is ALPHA+, a value VCHAR / SP / HTAB / CR / LF.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")
#: Kafka's bound on what a token may be (a 1 MiB one is refused before it is sent).
MAX_TOKEN_CHARS = 256 * 1024
_SEP = "\x01"


class OAuthTokenError(SaslAuthenticationError):
    """A token could not be had or was refused: the token provider (``oauth_cb``,
    ``sasl_oauth_token_provider``) raised or returned something that is not a token, the
    OIDC token endpoint failed, or the broker refused the token (its error status is in the
    message). Names the setting to fix; never shows the token or a secret."""


@dataclass(frozen=True)
class OAuthBearerToken:
    """A bearer token and what comes with it. ``expiry_ms``: wall-clock ms since the
    epoch; ``start_ms``: when it was obtained (the refresh is timed from it)."""

    value: str = field(repr=False)
    expiry_ms: int
    principal: str
    start_ms: int
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __reduce__(self) -> NoReturn:
        raise TypeError("an OAuthBearerToken is a secret and is not pickled")

    @property
    def lifetime_ms(self) -> int:
        return self.expiry_ms - self.start_ms


def jwt_claims(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (header, payload) of a compact JWT, unverified; ``ValueError`` if it is not one."""
    header, payload, _ = jwt.decode(token)
    return header, payload


def unsecured_jwt(
    principal: str,
    now_ms: int,
    *,
    lifetime_s: int = 3600,
    scope: tuple[str, ...] = (),
    principal_claim: str = "sub",
    scope_claim: str = "scope",
) -> OAuthBearerToken:
    """An unsigned (``alg: none``) JWT for ``principal``: what librdkafka's and Java's
    unsecured login make, for brokers with Kafka's unsecured validator (tests, dev)."""
    issued_s = now_ms / 1000
    payload: dict[str, Any] = {
        principal_claim: principal,
        "iat": issued_s,
        "exp": issued_s + lifetime_s,
    }
    if scope:
        payload[scope_claim] = list(scope)
    header = jwt.b64url_encode(b'{"alg":"none"}')
    body = jwt.b64url_encode(json.dumps(payload, separators=(",", ":")).encode())
    return OAuthBearerToken(f"{header}.{body}.", now_ms + lifetime_s * 1000, principal, now_ms, {})


def parse_oauthbearer_config(text: str) -> dict[str, str]:
    """librdkafka's ``sasl.oauthbearer.config`` (``principal=alice scope=a,b
    lifeSeconds=600 extension_traceId=7``) as a dict; ``ValueError`` naming the bad part."""
    out: dict[str, str] = {}
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{part!r} is not name=value")
        if key in out:
            raise ValueError(f"{key!r} is given twice")
        out[key] = value
    return out


def parse_extensions(text: str) -> dict[str, str]:
    """``sasl.oauthbearer.extensions`` (``key=value,key2=value2``, librdkafka's form)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r} is not key=value")
        out[key.strip()] = value.strip()
    check_extensions(out)
    return out


def check_extensions(extensions: Mapping[str, str]) -> None:
    """RFC 7628's rules for extension names and values (``auth`` is the token's)."""
    for key, value in extensions.items():
        if not isinstance(key, str) or not _EXTENSION_KEY.fullmatch(key):
            raise ValueError(f"extension name {key!r} must be letters only (RFC 7628)")
        if key == "auth":
            raise ValueError("'auth' is reserved for the token and is not an extension")
        if not isinstance(value, str) or not _EXTENSION_VALUE.fullmatch(value):
            raise ValueError(
                f"extension {key!r} must have a non-empty value of printable ASCII (RFC 7628)"
            )


def check_token_value(value: object, source: str) -> str:
    """The compact token as a string, or ``OAuthTokenError`` saying what is wrong with it
    (never showing it)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            raise OAuthTokenError(f"{source} returned a token that is not ASCII") from None
    if not isinstance(value, str):
        raise OAuthTokenError(
            f"{source} returned a token of type {type(value).__name__}; it must be a str"
        )
    if not value:
        raise OAuthTokenError(f"{source} returned an empty token")
    if len(value) > MAX_TOKEN_CHARS:
        raise OAuthTokenError(
            f"{source} returned a token of {len(value)} characters, more than the "
            f"{MAX_TOKEN_CHARS} a broker takes"
        )
    if not _B64TOKEN.fullmatch(value):
        raise OAuthTokenError(
            f"{source} returned a token with characters a bearer token cannot have "
            "(RFC 6750: letters, digits and -._~+/ with = padding)"
        )
    return value


def token_from_callback(result: object, now_ms: int, source: str) -> OAuthBearerToken:
    """What confluent-kafka's ``oauth_cb`` returns — ``(token, expiry_s)`` or ``(token,
    expiry_s, principal[, extensions])``, the expiry in seconds since the epoch — checked."""
    if not isinstance(result, tuple) or not 2 <= len(result) <= 4:
        raise OAuthTokenError(
            f"{source} must return (token, expiry_seconds_since_epoch[, principal"
            f"[, extensions]]); it returned a {type(result).__name__}"
            + (f" of {len(result)} items" if isinstance(result, tuple) else "")
        )
    value = check_token_value(result[0], source)
    expiry = result[1]
    if (
        isinstance(expiry, bool)
        or not isinstance(expiry, (int, float))
        or not math.isfinite(expiry)
    ):
        raise OAuthTokenError(
            f"{source} returned an expiry of type {type(expiry).__name__}; it must be seconds "
            "since the epoch (an int or float)"
        )
    expiry_ms = int(expiry * 1000)
    if expiry_ms <= now_ms:
        raise OAuthTokenError(
            f"{source} returned a token that expired {(now_ms - expiry_ms) / 1000:.0f} s ago "
            "(the expiry is seconds since the epoch, not a lifetime)"
        )
    principal = result[2] if len(result) > 2 else ""
    if not isinstance(principal, str):
        raise OAuthTokenError(f"{source} returned a principal that is not a str")
    extensions = result[3] if len(result) > 3 else {}
    if extensions is None:
        extensions = {}
    if not isinstance(extensions, Mapping):
        raise OAuthTokenError(f"{source} returned extensions that are not a dict")
    try:
        check_extensions(extensions)
    except ValueError as exc:
        raise OAuthTokenError(f"{source} returned bad SASL extensions: {exc}") from None
    if not principal:
        principal = _subject(value)
    return OAuthBearerToken(value, expiry_ms, principal, now_ms, dict(extensions))


def _subject(value: str) -> str:
    """The token's ``sub``, if it is a JWT that has one (for log lines only)."""
    try:
        sub = jwt_claims(value)[1].get("sub")
    except ValueError:
        return ""
    return sub if isinstance(sub, str) else ""


def now_wall_ms() -> int:
    return time.time_ns() // 1_000_000


def client_first_message(token: str, extensions: Mapping[str, str]) -> bytes:
    """RFC 7628's initial client response, as Kafka sends it (no authzid)."""
    kvpairs = "".join(f"{key}={value}{_SEP}" for key, value in extensions.items())
    return f"n,,{_SEP}auth=Bearer {token}{_SEP}{kvpairs}{_SEP}".encode()


class OAuthBearerMechanism:
    """One OAUTHBEARER exchange (Kafka's ``OAuthBearerSaslClient``)."""

    name = "OAUTHBEARER"

    def __init__(self, token: OAuthBearerToken) -> None:
        self._message = client_first_message(token.value, token.extensions)
        #: the broker's error (RFC 7628 JSON: status, scope, openid-configuration), if any
        self.broker_error: str | None = None

    def __repr__(self) -> str:
        return "OAuthBearerMechanism()"

    def __reduce__(self) -> NoReturn:
        raise TypeError("an OAUTHBEARER exchange holds a token and is not pickled")

    def initial_response(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        if not challenge:
            return None  # success
        if self.broker_error is not None:
            raise SaslAuthenticationError(
                "OAUTHBEARER: the broker sent a second message after its error"
            )
        self.broker_error = describe_broker_error(challenge)
        return _SEP.encode()  # RFC 7628: acknowledge the error; the broker then fails us


def describe_broker_error(challenge: bytes) -> str:
    """The broker's RFC 7628 error (``{"status": "invalid_token", ...}``), shortened."""
    text = challenge[:1000].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return f"broker error {text[:200]!r}"
    if not isinstance(data, dict):
        return f"broker error {text[:200]!r}"
    parts = [f"status {str(data.get('status'))[:100]!r}"]
    if data.get("scope"):
        parts.append(f"scope {str(data['scope'])[:100]!r}")
    return "broker error " + ", ".join(parts)
