"""The OIDC client-credentials grant (KIP-768): Kafka's ``HttpAccessTokenRetriever`` and
``ClientCredentialsJwtRetriever``, librdkafka's ``sasl.oauthbearer.method=oidc``.

``OidcTokenFetcher`` POSTs ``grant_type=client_credentials`` (and ``scope``) to
``sasl.oauthbearer.token.endpoint.url`` with HTTP Basic authentication by
``sasl.oauthbearer.client.id`` / ``.client.secret``, over TLS with the producer's trust
settings when the URL is ``https``. Each attempt is bounded by
``sasl.login.connect.timeout.ms`` and ``sasl.login.read.timeout.ms``; a failure that may pass
(connection refused, a timeout, HTTP 5xx or 429) is retried after
``sasl.login.retry.backoff.ms``, doubling, until ``sasl.login.retry.backoff.max.ms`` of
backoff has been spent. Runs on whichever thread fetches (``TokenSource``). The secret is
never logged, repr'd or put in an error; the endpoint's ``error`` / ``error_description``
are shown, shortened.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import math
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import NoReturn

from kclient.oauth.token import (
    OAuthBearerToken,
    OAuthTokenError,
    check_token_value,
    jwt_claims,
)

log = logging.getLogger(__name__)

#: The largest token endpoint answer read (a 1 MiB token plus room).
MAX_RESPONSE_BYTES = 2 * 1024 * 1024
_URL_SETTING = "'sasl.oauthbearer.token.endpoint.url'"


class _Retriable(Exception):
    pass


class OidcTokenFetcher:
    """Fetches tokens from an OIDC token endpoint (client-credentials grant)."""

    def __init__(
        self,
        url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        extensions: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout_ms: int = 10_000,
        read_timeout_ms: int = 10_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise OAuthTokenError(
                f"{_URL_SETTING} must be an http:// or https:// URL, got {url[:200]!r}"
            )
        self.url = url
        self._parsed = parsed
        self.client_id = client_id
        self._secret = client_secret
        self._scope = scope
        self._extensions = dict(extensions or {})
        self._ssl_context = ssl_context
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._read_timeout_s = read_timeout_ms / 1000
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"OidcTokenFetcher({self.url!r}, client_id={self.client_id!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("an OidcTokenFetcher holds a client secret and is not pickled")

    def __call__(self, now_ms: int) -> OAuthBearerToken:
        """A new token, after retries; ``OAuthTokenError`` naming the setting if none."""
        backoff_ms, spent_ms, attempt = self._backoff_ms, 0, 1
        while True:
            try:
                return self._attempt(now_ms)
            except _Retriable as exc:  # noqa: PERF203 - one attempt per HTTP request
                if spent_ms + backoff_ms > self._backoff_max_ms:
                    raise OAuthTokenError(
                        f"no token from the OIDC token endpoint {self.url} after {attempt} "
                        f"attempt(s): {exc}; check {_URL_SETTING} (timeouts: "
                        "'sasl.login.connect.timeout.ms', 'sasl.login.read.timeout.ms'; "
                        "retries: 'sasl.login.retry.backoff.max.ms')"
                    ) from None
                log.warning(
                    "OIDC token endpoint %s: %s; retrying in %d ms", self.url, exc, backoff_ms
                )
                self._sleep(backoff_ms / 1000)
                spent_ms += backoff_ms
                now_ms += backoff_ms
                backoff_ms *= 2
                attempt += 1

    def _request_body(self) -> bytes:
        fields = {"grant_type": "client_credentials"}
        if self._scope:
            fields["scope"] = self._scope
        return urllib.parse.urlencode(fields).encode()

    def _attempt(self, now_ms: int) -> OAuthBearerToken:
        parsed = self._parsed
        connection: http.client.HTTPConnection
        if parsed.scheme == "https":
            context = self._ssl_context or ssl.create_default_context()
            connection = http.client.HTTPSConnection(
                parsed.hostname or "", parsed.port, timeout=self._connect_timeout_s, context=context
            )
        else:
            connection = http.client.HTTPConnection(
                parsed.hostname or "", parsed.port, timeout=self._connect_timeout_s
            )
        basic = base64.b64encode(f"{self.client_id}:{self._secret}".encode()).decode()
        path = parsed.path or "/"
        if parsed.query:
            path += "?" + parsed.query
        started = time.monotonic()
        try:
            try:
                connection.connect()
            except (OSError, ssl.SSLError) as exc:
                raise _Retriable(f"cannot connect ({_describe(exc)})") from None
            if connection.sock is not None:
                connection.sock.settimeout(self._read_timeout_s)
            try:
                connection.request(
                    "POST",
                    path,
                    body=self._request_body(),
                    headers={
                        "Authorization": f"Basic {basic}",
                        "Content-Type": "application/x-www-form-urlencoded",
                        "Accept": "application/json",
                    },
                )
                response = connection.getresponse()
                data = response.read(MAX_RESPONSE_BYTES + 1)
            except (OSError, http.client.HTTPException) as exc:
                waited = time.monotonic() - started
                raise _Retriable(f"no answer ({_describe(exc)} after {waited:.1f} s)") from None
        finally:
            connection.close()
        if len(data) > MAX_RESPONSE_BYTES:
            raise OAuthTokenError(
                f"the OIDC token endpoint {self.url} answered with more than "
                f"{MAX_RESPONSE_BYTES} bytes; check {_URL_SETTING}"
            )
        status = response.status
        if status >= 500 or status == 429:
            raise _Retriable(f"HTTP {status}{_error_detail(data)}")
        if status != 200:
            raise OAuthTokenError(
                f"the OIDC token endpoint {self.url} refused client "
                f"{self.client_id!r}: HTTP {status}{_error_detail(data)}; check "
                "'sasl.oauthbearer.client.id', 'sasl.oauthbearer.client.secret' and "
                "'sasl.oauthbearer.scope'"
            )
        return self._token(data, now_ms)

    def _token(self, data: bytes, now_ms: int) -> OAuthBearerToken:
        source = f"the OIDC token endpoint {self.url}"
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "access_token" not in answer:
            raise OAuthTokenError(
                f"{source} answered with something that is not a JSON object with an "
                f"'access_token' ({len(data)} bytes); check {_URL_SETTING}"
            )
        value = check_token_value(answer["access_token"], source)
        expiry_ms: int | None = None
        principal = self.client_id
        try:
            claims = jwt_claims(value)[1]
        except ValueError:
            claims = {}
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and math.isfinite(exp):
            expiry_ms = int(exp * 1000)
        sub = claims.get("sub")
        if isinstance(sub, str) and sub:
            principal = sub
        expires_in = answer.get("expires_in")
        if expiry_ms is None and isinstance(expires_in, (int, float)) and expires_in > 0:
            expiry_ms = now_ms + int(expires_in * 1000)
        if expiry_ms is None:
            raise OAuthTokenError(
                f"{source} gave a token without an expiry (no 'exp' claim, no 'expires_in')"
            )
        if expiry_ms <= now_ms:
            raise OAuthTokenError(
                f"{source} gave a token that has already expired (is this machine's clock right?)"
            )
        return OAuthBearerToken(value, expiry_ms, principal, now_ms, dict(self._extensions))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text[:200]


def _error_detail(data: bytes) -> str:
    """The endpoint's OAuth error (RFC 6749 ``error``, ``error_description``), shortened."""
    try:
        answer = json.loads(data[:10_000])
    except ValueError:
        return ""
    if not isinstance(answer, dict):
        return ""
    parts = [str(answer[k])[:200] for k in ("error", "error_description") if answer.get(k)]
    return f" ({': '.join(parts)})" if parts else ""
