"""Signed-JWT validation for the embedded broker's OAUTHBEARER listener: Kafka's
``OAuthBearerValidatorCallbackHandler`` with ``RefreshingHttpsJwks`` and
``ValidatorAccessTokenValidator`` (KIP-768).

``JwksKeys`` holds the public keys a JWKS endpoint (RFC 7517) serves, by ``kid``: fetched
when the listener is built (a failure is a ``ConfigError`` naming
``--sasl-oauthbearer-jwks-endpoint-url``), then again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` and as soon as a token names a key it does not
know (at most once per ``retry_backoff_ms``), always on a one-shot background thread so a
Processor never waits for HTTP: the token that named the unknown key is refused, the next
attempt finds it. ``JwksValidator`` checks a token's RS256 / ES256 signature (RFC 7515,
with ``cryptography``, the ``oauth`` extra; an ``https`` JWKS is trusted by the listener's
``ssl.truststore.location`` when set, else the system's CAs) and its claims: ``exp``,
``nbf``, ``iat`` (with ``sasl.oauthbearer.clock.skew.seconds``), ``aud`` and ``iss`` when
expected, ``sub``.
Shared, thread-safe, by every Processor.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from kclient.broker.sasl_oauth import (
    TokenRejected,
    ValidatedToken,
    check_subject,
    check_times,
    split_jwt,
    token_scope,
)
from kclient.errors import ConfigError
from kclient.protocol.jwt import b64url_decode

log = logging.getLogger(__name__)

JWKS_FLAG = "--sasl-oauthbearer-jwks-endpoint-url"
MAX_JWKS_BYTES = 1024 * 1024
ALGORITHMS = ("RS256", "ES256")


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
    except ImportError:
        raise ConfigError(
            f"{JWKS_FLAG} checks token signatures with the 'cryptography' package: "
            "pip install 'kclient[oauth]'"
        ) from None
    return hashes, ec, padding, rsa, utils


def _int(value: object) -> int:
    if not isinstance(value, str):
        raise ValueError("not a base64url string")
    return int.from_bytes(b64url_decode(value), "big")


def load_jwk(jwk: dict[str, Any]) -> tuple[str, Any] | None:
    """(algorithm, public key) of one JWK, or None for a key this validator cannot use."""
    _, ec, _, rsa, _ = _crypto()
    kty = jwk.get("kty")
    try:
        if kty == "RSA":
            return "RS256", rsa.RSAPublicNumbers(
                _int(jwk.get("e")), _int(jwk.get("n"))
            ).public_key()
        if kty == "EC" and jwk.get("crv") == "P-256":
            numbers = ec.EllipticCurvePublicNumbers(
                _int(jwk.get("x")), _int(jwk.get("y")), ec.SECP256R1()
            )
            return "ES256", numbers.public_key()
    except ValueError:
        return None
    return None


class JwksKeys:
    """The keys of one JWKS endpoint, refreshed in the background."""

    def __init__(
        self,
        url: str,
        *,
        refresh_ms: int = 3_600_000,
        retry_backoff_ms: int = 100,
        timeout_ms: int = 10_000,
        monotonic_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000,
        download: Callable[[], bytes] | None = None,
        spawn: Callable[[Callable[[], None]], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        _crypto()  # names the extra now, not at the first token
        self.url = url
        self._download = download or self._http_get
        self._spawn = spawn or _daemon_thread
        self._ssl_context = ssl_context
        self._refresh_ms = refresh_ms
        self._backoff_ms = max(retry_backoff_ms, 1)
        self._timeout_s = timeout_ms / 1000
        self._monotonic_ms = monotonic_ms
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[str, Any]] = {}
        self._fetched_ms = 0
        self._attempted_ms = 0
        self._refreshing = False
        try:
            self._install(self._fetch())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{JWKS_FLAG} {url}: cannot read the keys ({exc})") from None

    def __repr__(self) -> str:
        return f"JwksKeys({self.url!r}, {len(self._keys)} keys)"

    def _http_get(self) -> bytes:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout_s, context=self._ssl_context
            ) as response:
                data: bytes = response.read(MAX_JWKS_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise ValueError(f"HTTP {exc.code}") from None
        return data

    def _fetch(self) -> dict[str, tuple[str, Any]]:
        data = self._download()
        if len(data) > MAX_JWKS_BYTES:
            raise ValueError(f"more than {MAX_JWKS_BYTES} bytes")
        try:
            document = json.loads(data)
        except ValueError:
            raise ValueError("not JSON") from None
        keys = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(keys, list):
            raise ValueError("not a JWK set (no 'keys' list)")
        out: dict[str, tuple[str, Any]] = {}
        for jwk in keys:
            if isinstance(jwk, dict) and jwk.get("use", "sig") == "sig":
                loaded = load_jwk(jwk)
                if loaded is not None:
                    out[str(jwk.get("kid", ""))] = loaded
        return out

    def _install(self, keys: dict[str, tuple[str, Any]]) -> None:
        now_ms = self._monotonic_ms()
        with self._lock:
            self._keys = keys
            self._fetched_ms = self._attempted_ms = now_ms
            self._refreshing = False
        log.info("JWKS %s: %d signing keys (%s)", self.url, len(keys), ", ".join(sorted(keys)))

    def _refresh(self) -> None:
        try:
            self._install(self._fetch())
        except (OSError, ValueError) as exc:
            log.warning("JWKS %s: refresh failed (%s); keeping the keys we have", self.url, exc)
            with self._lock:
                self._refreshing = False

    def _maybe_refresh(self, now_ms: int, missing: bool) -> None:
        with self._lock:
            stale = now_ms - self._fetched_ms >= self._refresh_ms
            if self._refreshing or not (stale or missing):
                return
            if now_ms - self._attempted_ms < self._backoff_ms:
                return
            self._refreshing = True
            self._attempted_ms = now_ms
        self._spawn(self._refresh)

    def key(self, kid: str) -> tuple[str, Any] | None:
        now_ms = self._monotonic_ms()
        with self._lock:
            found = self._keys.get(kid)
            if found is None and not kid and len(self._keys) == 1:
                found = next(iter(self._keys.values()))
        self._maybe_refresh(now_ms, found is None)
        return found


def _daemon_thread(target: Callable[[], None]) -> None:
    threading.Thread(target=target, name="kclient-broker-jwks", daemon=True).start()


class JwksValidator:
    """Signed JWTs (RS256, ES256) against a JWKS endpoint's keys, with Kafka's checks."""

    def __init__(
        self,
        keys: JwksKeys,
        *,
        expected_audience: Iterable[str] = (),
        expected_issuer: str | None = None,
        clock_skew_ms: int = 30_000,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
    ) -> None:
        self.keys = keys
        self.expected_audience = tuple(expected_audience)
        self.expected_issuer = expected_issuer
        self._skew_ms = clock_skew_ms
        self._principal_claim = principal_claim
        self._scope_claim = scope_claim

    def __repr__(self) -> str:
        return (
            f"JwksValidator({self.keys!r}, audience={self.expected_audience}, "
            f"issuer={self.expected_issuer!r})"
        )

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        header, claims, head, payload, signature = split_jwt(token)
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise TokenRejected(
                f"the token's algorithm {str(alg)[:20]!r} is not one this listener takes "
                f"({', '.join(ALGORITHMS)})"
            )
        kid = header.get("kid", "")
        found = self.keys.key(str(kid))
        if found is None:
            raise TokenRejected(
                f"the token is signed by key {str(kid)[:64]!r}, which {self.keys.url} does not "
                "list (refreshing the keys)"
            )
        key_alg, key = found
        if key_alg != alg:
            raise TokenRejected(f"key {str(kid)[:64]!r} is for {key_alg}, the token says {alg}")
        try:
            raw = b64url_decode(signature)
        except ValueError:
            raise TokenRejected("the token's signature is not base64url") from None
        self._verify(alg, key, f"{head}.{payload}".encode(), raw)
        expiry_ms = check_times(claims, now_ms, self._skew_ms)
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise TokenRejected(
                f"the token's issuer {str(claims.get('iss'))[:100]!r} is not the expected "
                f"{self.expected_issuer!r}"
            )
        if self.expected_audience:
            aud = claims.get("aud")
            audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(a in self.expected_audience for a in audiences):
                raise TokenRejected(
                    f"the token's audience {str(aud)[:100]!r} is none of the expected "
                    f"{', '.join(self.expected_audience)}"
                )
        principal = check_subject(claims, self._principal_claim)
        return ValidatedToken(principal, expiry_ms, token_scope(claims, self._scope_claim))

    @staticmethod
    def _verify(alg: str, key: Any, signed: bytes, signature: bytes) -> None:
        hashes, ec, padding, _, utils = _crypto()
        from cryptography.exceptions import InvalidSignature

        try:
            if alg == "RS256":
                key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
            else:
                if len(signature) != 64:
                    raise InvalidSignature
                r = int.from_bytes(signature[:32], "big")
                s = int.from_bytes(signature[32:], "big")
                key.verify(utils.encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise TokenRejected("the token's signature does not verify") from None
