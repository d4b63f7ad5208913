"""The broker's side of SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-342, KIP-768): Kafka's
``OAuthBearerSaslServer`` with its ``OAuthBearerUnsecuredValidatorCallbackHandler`` and
``OAuthBearerValidatorCallbackHandler`` (JWKS).

Written from the RFCs (7519 JWT, 7515 JWS, 7517 JWK, 7628), independently of the client in
``kclient.oauth``. ``OAuthBearerExchange`` parses the client-first message
(``n,,\\x01auth=Bearer <token>\\x01k=v\\x01\\x01``) and asks the listener's validator:

* ``UnsecuredValidator`` (the default): unsigned JWTs (``alg: none``) whose ``exp`` has not
  passed and that name a ``sub``; with ``required_scope`` they must carry those scopes.
* ``JwksValidator`` (``--sasl-oauthbearer-jwks-endpoint-url``): RS256 / ES256 signed JWTs,
  checked against the keys the JWKS endpoint serves (``jwks.JwksKeys``), plus ``exp``,
  ``nbf``, ``iat``, ``aud`` (``--sasl-oauthbearer-expected-audience``) and ``iss``
  (``--sasl-oauthbearer-expected-issuer``).

A refused token is answered as RFC 7628 says: the server's JSON error
(``{"status":"invalid_token"}``) as a challenge, and after the client's ``\\x01`` the exchange
fails with that JSON as the error message (as Kafka does). The principal is the token's
``sub``; the session lasts until the token expires (or ``connections.max.reauth.ms``, if
sooner), after which the client must re-authenticate (KIP-368). Validators are shared by
every Processor thread; each exchange belongs to its connection's Processor.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kclient.broker.sasl_server import SaslFailure, loggable_name
from kclient.errors import ConfigError
from kclient.protocol import jwt

__all__ = [
    "OAuthBearerExchange",
    "TokenRejected",
    "TokenValidator",
    "UnsecuredValidator",
    "ValidatedToken",
    "check_oauthbearer_settings",
    "oauth_validator",
]

_SEP = b"\x01"
_AUTH = re.compile(rb"Bearer ([A-Za-z0-9\-._~+/]+=*)")
_EXTENSION_KEY = re.compile(rb"[A-Za-z]+")
_GENERIC_REFUSAL = "Authentication failed: invalid OAUTHBEARER token"


class TokenRejected(Exception):
    """A token the validator refuses: ``reason`` for the broker's log (never the token),
    ``status`` the RFC 7628 error status for the client."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope


@dataclass(frozen=True)
class ValidatedToken:
    """What a valid token says: who (``principal``) and until when (``expiry_ms``)."""

    principal: str
    expiry_ms: int
    scope: tuple[str, ...] = ()


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        """The token's principal and expiry, or ``TokenRejected``."""
        ...


def split_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any], str, str, str]:
    """(header, claims, header part, payload part, signature part); ``TokenRejected``."""
    try:
        header, claims, parts = jwt.decode(token)
    except ValueError as exc:
        raise TokenRejected(f"not a JWT ({exc})") from None
    return header, claims, parts[0], parts[1], parts[2]


def _number(claims: dict[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenRejected(f"the token has no {name!r} claim")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TokenRejected(f"the token's {name!r} claim is not a number")
    return float(value)


def check_times(claims: dict[str, Any], now_ms: int, skew_ms: int) -> int:
    """``exp`` (required, not passed), ``nbf`` and ``iat`` (if there, not in the future);
    the expiry in ms."""
    exp = _number(claims, "exp", True)
    assert exp is not None
    expiry_ms = int(exp * 1000)
    if expiry_ms + skew_ms <= now_ms:
        raise TokenRejected(f"the token expired {(now_ms - expiry_ms) // 1000} s ago")
    for name in ("nbf", "iat"):
        value = _number(claims, name, False)
        if value is not None and int(value * 1000) - skew_ms > now_ms:
            raise TokenRejected(f"the token's {name!r} is in the future")
    return expiry_ms


def check_subject(claims: dict[str, Any], claim: str = "sub") -> str:
    sub = claims.get(claim)
    if not isinstance(sub, str) or not sub.strip():
        raise TokenRejected(f"the token has no {claim!r} claim (the principal)")
    return sub


def token_scope(claims: dict[str, Any], claim: str = "scope") -> tuple[str, ...]:
    value = claims.get(claim)
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return ()


class UnsecuredValidator:
    """Kafka's unsecured validator: unsigned JWTs (``alg: none``) only; for tests."""

    def __init__(
        self,
        required_scope: Iterable[str] = (),
        allowable_clock_skew_ms: int = 0,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
    ) -> None:
        self.required_scope = tuple(required_scope)
        self._skew_ms = allowable_clock_skew_ms
        self._principal_claim = principal_claim
        self._scope_claim = scope_claim

    def __repr__(self) -> str:
        return f"UnsecuredValidator(required_scope={self.required_scope})"

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        header, claims, _, _, signature = split_jwt(token)
        if header.get("alg") != "none" or signature:
            raise TokenRejected(
                f"the token is signed (alg {str(header.get('alg'))[:20]!r}); this listener "
                "takes unsecured (alg none) tokens only (set --sasl-oauthbearer-jwks-endpoint-url "
                "to check signed ones)"
            )
        expiry_ms = check_times(claims, now_ms, self._skew_ms)
        principal = check_subject(claims, self._principal_claim)
        scope = token_scope(claims, self._scope_claim)
        missing = [s for s in self.required_scope if s not in scope]
        if missing:
            raise TokenRejected(
                f"the token lacks the required scope {' '.join(missing)}",
                "insufficient_scope",
                " ".join(self.required_scope),
            )
        return ValidatedToken(principal, expiry_ms, scope)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class OAuthBearerExchange:
    """One OAUTHBEARER authentication attempt (Kafka's ``OAuthBearerSaslServer``)."""

    mechanism = "OAUTHBEARER"

    def __init__(
        self,
        validator: TokenValidator,
        wall_ms: Callable[[], int] = _wall_ms,
        max_reauth_ms: int = 0,
    ) -> None:
        self._validator = validator
        self._wall_ms = wall_ms
        self._max_reauth_ms = max_reauth_ms
        self.username: str | None = None
        self.complete = False
        self.extensions: dict[str, str] = {}
        #: ms the session may last: until the token expires (KIP-368); None before
        self.session_lifetime_ms: int | None = None
        self._error: tuple[str, str] | None = None  # (log reason, JSON for the client)

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            reason, answer = self._error
            if token == _SEP:
                raise SaslFailure(reason, answer)
            raise SaslFailure(
                f"{reason}; then the client did not acknowledge the error with %x01",
                answer,
            )
        if self.complete:
            raise SaslFailure("a token after OAUTHBEARER completed", _GENERIC_REFUSAL)
        value, authzid = self._parse_client_first(token)
        try:
            validated = self._validator.validate(value, self._wall_ms())
            if authzid and authzid != validated.principal:
                raise TokenRejected(
                    f"the authorization id {loggable_name(authzid)!r} is not the token's "
                    f"principal {loggable_name(validated.principal)!r}"
                )
        except TokenRejected as rejected:
            self._error = (rejected.reason, _json_error(rejected.status, rejected.scope))
            return self._error[1].encode()
        now_ms = self._wall_ms()
        lifetime_ms = max(validated.expiry_ms - now_ms, 1)
        if self._max_reauth_ms > 0:
            lifetime_ms = min(lifetime_ms, self._max_reauth_ms)
        self.session_lifetime_ms = lifetime_ms
        self.username = validated.principal
        self.complete = True
        return b""

    def _parse_client_first(self, message: bytes) -> tuple[str, str]:
        """The token of an RFC 7628 client-first message; its extensions kept."""
        gs2, sep, rest = message.partition(_SEP)
        if not sep or not (gs2.startswith((b"n,", b"y,")) and gs2.endswith(b",")):
            raise SaslFailure(
                "malformed OAUTHBEARER client-first message (no GS2 header)",
                "Authentication failed: malformed OAUTHBEARER message",
            )
        authzid = gs2[2:-1]
        if authzid and not authzid.startswith(b"a="):
            raise SaslFailure(
                "malformed OAUTHBEARER GS2 header",
                "Authentication failed: malformed OAUTHBEARER message",
            )
        if not rest.endswith(_SEP + _SEP) and rest != _SEP:
            raise SaslFailure(
                "malformed OAUTHBEARER client-first message (not ended by %x01%x01)",
                "Authentication failed: malformed OAUTHBEARER message",
            )
        token: str | None = None
        for pair in rest[:-2].split(_SEP) if rest != _SEP else []:
            key, eq, value = pair.partition(b"=")
            if not eq:
                raise SaslFailure(
                    "malformed OAUTHBEARER key/value pair",
                    "Authentication failed: malformed OAUTHBEARER message",
                )
            if key == b"auth":
                match = _AUTH.fullmatch(value)
                if match is None:
                    raise SaslFailure(
                        "malformed OAUTHBEARER auth value (not 'Bearer <token>')",
                        "Authentication failed: malformed OAUTHBEARER message",
                    )
                token = match.group(1).decode()
            elif _EXTENSION_KEY.fullmatch(key):
                self.extensions[key.decode()] = value.decode("utf-8", "replace")
            else:
                raise SaslFailure(
                    "a malformed OAUTHBEARER extension name",
                    "Authentication failed: malformed OAUTHBEARER message",
                )
        if token is None:
            raise SaslFailure(
                "the OAUTHBEARER message has no auth=Bearer token",
                "Authentication failed: malformed OAUTHBEARER message",
            )
        # as Kafka: an authorization id (a=...) must be the token's principal
        return token, authzid[2:].decode("utf-8", "replace")


def _json_error(status: str, scope: str) -> str:
    error: dict[str, str] = {"status": status}
    if scope:
        error["scope"] = scope
    return json.dumps(error, separators=(",", ":"))


# ---- the listener's settings (``BrokerConfig``'s OAUTHBEARER part) ------------------------


def check_oauthbearer_settings(config: Any) -> dict[str, tuple[str, ...]]:
    """Check a ``BrokerConfig``'s ``sasl_oauthbearer_*`` settings against each other;
    the lists among them normalized (a comma-separated string is accepted)."""
    lists: dict[str, tuple[str, ...]] = {}
    for name in ("sasl_oauthbearer_expected_audience", "sasl_oauthbearer_required_scope"):
        value = getattr(config, name)
        if isinstance(value, str):
            value = tuple(v.strip() for v in value.split(",") if v.strip())
        lists[name] = tuple(value)
    url = config.sasl_oauthbearer_jwks_endpoint_url
    oauth_set = [
        name
        for name, is_set in (
            ("sasl.oauthbearer.jwks.endpoint.url", url),
            ("sasl.oauthbearer.expected.audience", lists["sasl_oauthbearer_expected_audience"]),
            ("sasl.oauthbearer.expected.issuer", config.sasl_oauthbearer_expected_issuer),
            ("unsecuredValidatorRequiredScope", lists["sasl_oauthbearer_required_scope"]),
        )
        if is_set
    ]
    if oauth_set and "OAUTHBEARER" not in (config.sasl_enabled_mechanisms if config.sasl else ()):
        raise ConfigError(
            f"{', '.join(repr(n) for n in oauth_set)} set, but OAUTHBEARER is not enabled: "
            "set security.protocol=SASL_PLAINTEXT (or SASL_SSL) and "
            "sasl.enabled.mechanisms=OAUTHBEARER"
        )
    if url is None:
        for name in ("expected.audience", "expected.issuer"):
            if f"sasl.oauthbearer.{name}" in oauth_set:
                raise ConfigError(
                    f"'sasl.oauthbearer.{name}' checks signed tokens: it needs "
                    "'sasl.oauthbearer.jwks.endpoint.url'"
                )
    elif not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"'sasl.oauthbearer.jwks.endpoint.url' must be an http(s) URL, got {url!r}"
        )
    elif lists["sasl_oauthbearer_required_scope"]:
        raise ConfigError(
            "the required scope is checked by the unsecured validator only; leave it out "
            "with 'sasl.oauthbearer.jwks.endpoint.url'"
        )
    return lists


def oauth_validator(config: Any) -> TokenValidator | None:
    """The listener's OAUTHBEARER validator (None if not enabled): one of the user's own
    (``sasl_server_callback_handler``), the JWKS one (its keys read now, or
    ``ConfigError``) or Kafka's unsecured one."""
    if "OAUTHBEARER" not in config.sasl_enabled_mechanisms:
        return None
    url = config.sasl_oauthbearer_jwks_endpoint_url
    own: TokenValidator | None = config.sasl_server_callback_handler
    if own is not None:
        if url is not None:
            raise ConfigError(
                "set 'sasl.server.callback.handler' or 'sasl.oauthbearer.jwks.endpoint.url', "
                "not both"
            )
        return own
    if url is None:
        return UnsecuredValidator(config.sasl_oauthbearer_required_scope)
    from kclient.broker.sasl_oauth_jwks import JwksKeys, JwksValidator

    context = None
    if url.startswith("https://") and config.ssl_truststore_location:  # as Kafka: ssl.*
        import ssl

        context = ssl.create_default_context(cafile=config.ssl_truststore_location)
    keys = JwksKeys(
        url, refresh_ms=config.sasl_oauthbearer_jwks_endpoint_refresh_ms, ssl_context=context
    )
    return JwksValidator(
        keys,
        expected_audience=config.sasl_oauthbearer_expected_audience,
        expected_issuer=config.sasl_oauthbearer_expected_issuer,
        clock_skew_ms=config.sasl_oauthbearer_clock_skew_seconds * 1000,
    )
