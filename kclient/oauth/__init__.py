"""SASL/OAUTHBEARER for the producer (KIP-255, KIP-342, KIP-368, KIP-768): Kafka's
``OAuthBearerLoginModule`` and the callback handlers that give it tokens.

``credentials_from_settings`` turns the producer's settings into ``OAuthBearerCredentials``
(caller's thread, once, in ``ProducerConfig``). The token comes from exactly one of:

* ``oauth_cb`` (confluent-kafka's): ``oauth_cb(sasl.oauthbearer.config) -> (token,
  expiry_seconds_since_epoch[, principal[, extensions]])``;
* ``sasl_oauth_token_provider`` (aiokafka's, kafka-python's): an object with ``async
  token() -> str`` (or a plain ``token()``) and, optionally, ``extensions() -> dict``. Its
  token's expiry is the JWT's ``exp``; a token that is no JWT is taken to last
  ``PROVIDER_TOKEN_LIFETIME_MS`` (10 minutes), unless ``token()`` returns ``(token,
  expiry_seconds_since_epoch)`` (kclient's addition);
* OIDC (``sasl.oauthbearer.method=oidc``, or Java's ``sasl.oauthbearer.token.endpoint.url``
  with ``OAuthBearerLoginModule``'s ``clientId`` / ``clientSecret``): the client-credentials
  grant, ``kclient.oauth.oidc``;
* unsecured JWTs (``enable.sasl.oauthbearer.unsecure.jwt=true`` with
  ``sasl.oauthbearer.config="principal=alice scope=a,b lifeSeconds=3600"``, or Java's
  ``unsecuredLoginStringClaim_sub``), for brokers with Kafka's unsecured validator.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from kclient.errors import ConfigError
from kclient.oauth.login import OAuthBearerCredentials, TokenSource
from kclient.oauth.oidc import OidcTokenFetcher
from kclient.oauth.token import (
    OAuthBearerMechanism,
    OAuthBearerToken,
    OAuthTokenError,
    check_extensions,
    check_token_value,
    jwt_claims,
    parse_extensions,
    parse_oauthbearer_config,
    token_from_callback,
    unsecured_jwt,
)

__all__ = [
    "OAuthBearerCredentials",
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "OAuthTokenError",
    "OidcTokenFetcher",
    "TokenSource",
    "callback_fetch",
    "credentials_from_settings",
    "unsecured_jwt",
]

#: How long a provider's token is taken to last when it does not say (not a JWT with
#: ``exp``, no ``(token, expiry_seconds)``): refreshed at 80-85% of it. AWS MSK IAM
#: tokens last 15 minutes.
PROVIDER_TOKEN_LIFETIME_MS = 600_000


def callback_fetch(
    oauth_cb: Callable[..., object], config_text: str
) -> Callable[[int], OAuthBearerToken]:
    """A token fetch over confluent-kafka's ``oauth_cb`` shape: ``oauth_cb(config_text)``
    returns ``(token, expiry_s[, principal[, extensions]])``, the expiry in seconds since the
    epoch; anything it raises becomes an ``OAuthTokenError`` naming ``'oauth_cb'``."""

    def fetch(now_ms: int) -> OAuthBearerToken:
        try:
            result = oauth_cb(config_text)
        except OAuthTokenError:
            raise
        except Exception as exc:
            raise OAuthTokenError(
                f"'oauth_cb' raised {type(exc).__name__}: {str(exc)[:200]}"
            ) from exc
        return token_from_callback(result, now_ms, "'oauth_cb'")

    return fetch


class _ProviderFetch:
    """aiokafka's ``AbstractTokenProvider``: ``await token()``, ``extensions()``."""

    SETTING = "'sasl_oauth_token_provider'"

    def __init__(self, provider: object) -> None:
        self._provider = provider

    async def __call__(self, now_ms: int) -> OAuthBearerToken:
        try:
            value = self._provider.token()  # type: ignore[attr-defined]
            if inspect.isawaitable(value):  # aiokafka's; kafka-python's token() is plain
                value = await value
            extensions = getattr(self._provider, "extensions", None)
            extra = extensions() if callable(extensions) else {}
        except Exception as exc:
            raise OAuthTokenError(
                f"{self.SETTING}.token() raised {type(exc).__name__}: {str(exc)[:200]}"
            ) from exc
        expiry_ms: int | None = None
        if isinstance(value, tuple):  # kclient's addition: (token, expiry_seconds)
            token = token_from_callback(value, now_ms, f"{self.SETTING}.token()")
            value, expiry_ms = token.value, token.expiry_ms
        value = check_token_value(value, f"{self.SETTING}.token()")
        if not isinstance(extra, Mapping):
            raise OAuthTokenError(f"{self.SETTING}.extensions() must return a dict")
        try:
            check_extensions(extra)
        except ValueError as exc:
            raise OAuthTokenError(f"{self.SETTING}.extensions(): {exc}") from None
        try:
            claims = jwt_claims(value)[1]
        except ValueError:
            claims = {}
        exp, sub = claims.get("exp"), claims.get("sub")
        if expiry_ms is None and isinstance(exp, (int, float)) and not isinstance(exp, bool):
            expiry_ms = int(exp * 1000)
        if expiry_ms is None:  # aiokafka's providers give no expiry: assume a short one
            expiry_ms = now_ms + PROVIDER_TOKEN_LIFETIME_MS
        if expiry_ms <= now_ms:
            raise OAuthTokenError(f"{self.SETTING}.token() returned an expired token")
        return OAuthBearerToken(
            value, expiry_ms, sub if isinstance(sub, str) else "", now_ms, dict(extra)
        )

    def blocking(self, now_ms: int) -> OAuthBearerToken:
        """For the thread-based producer: run the coroutine on this (loop-less) thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self(now_ms))
        raise OAuthTokenError(
            f"{self.SETTING}: no token yet, and this thread runs an event loop (use "
            "kclient.aio's AIOKafkaProducer, whose start() awaits the first token)"
        )


def _unsecured_fetch(options: Mapping[str, str], setting: str) -> Callable[[int], OAuthBearerToken]:
    principal = options.get("principal")
    if not principal:
        raise ConfigError(f"{setting} needs principal=<name> for unsecured JWTs")
    life = options.get("lifeSeconds", "3600")
    if not life.isdigit() or int(life) < 1:
        raise ConfigError(f"{setting}: lifeSeconds must be a positive integer, got {life!r}")
    scope = tuple(s for s in options.get("scope", "").split(",") if s)
    extensions = {
        k[len("extension_") :]: v for k, v in options.items() if k.startswith("extension_")
    }
    try:
        check_extensions(extensions)
    except ValueError as exc:
        raise ConfigError(f"{setting}: {exc}") from None

    def fetch(now_ms: int) -> OAuthBearerToken:
        token = unsecured_jwt(
            principal,
            now_ms,
            lifetime_s=int(life),
            scope=scope,
            principal_claim=options.get("principalClaimName", "sub"),
            scope_claim=options.get("scopeClaimName", "scope"),
        )
        return OAuthBearerToken(token.value, token.expiry_ms, principal, now_ms, extensions)

    return fetch


def credentials_from_settings(
    values: Mapping[str, Any], jaas_options: Mapping[str, str] | None = None
) -> OAuthBearerCredentials:
    """``sasl.mechanism=OAUTHBEARER``: the one token source the settings describe."""
    jaas = dict(jaas_options or {})
    oauth_cb = values.get("oauth_cb")
    provider = values.get("sasl_oauth_token_provider")
    method = values.get("sasl.oauthbearer.method") or "default"
    url = values.get("sasl.oauthbearer.token.endpoint.url")
    unsecure = bool(values.get("enable.sasl.oauthbearer.unsecure.jwt"))
    config_text = values.get("sasl.oauthbearer.config") or ""
    if "unsecuredLoginStringClaim_sub" in jaas:
        unsecure = True
    oidc = method == "oidc" or url is not None
    chosen = [
        name
        for name, given in (
            ("'oauth_cb'", oauth_cb is not None),
            ("'sasl_oauth_token_provider'", provider is not None),
            ("'sasl.oauthbearer.method=oidc'", oidc),
            ("'enable.sasl.oauthbearer.unsecure.jwt'", unsecure),
        )
        if given
    ]
    if len(chosen) > 1:
        raise ConfigError(
            f"OAUTHBEARER: {' and '.join(chosen)} are both set; the token comes from one of "
            "them: keep one"
        )
    if not chosen:
        raise ConfigError(
            "'sasl.mechanism' OAUTHBEARER needs a token source: 'oauth_cb' (a callable), "
            "'sasl.oauthbearer.method=oidc' with 'sasl.oauthbearer.token.endpoint.url', "
            "'sasl.oauthbearer.client.id' and '.client.secret', or "
            "'enable.sasl.oauthbearer.unsecure.jwt=true' with 'sasl.oauthbearer.config' "
            "(principal=...)"
        )
    extensions_text = values.get("sasl.oauthbearer.extensions") or ""
    try:
        extensions = parse_extensions(extensions_text)
    except ValueError as exc:
        raise ConfigError(f"'sasl.oauthbearer.extensions': {exc}") from None
    if oauth_cb is not None:
        if not callable(oauth_cb):
            raise ConfigError("'oauth_cb' must be a callable: oauth_cb(config_str)")
        source = TokenSource("'oauth_cb'", callback_fetch(oauth_cb, config_text))
        return OAuthBearerCredentials(source, "what 'oauth_cb' returns")
    if provider is not None:
        if not callable(getattr(provider, "token", None)):
            raise ConfigError(
                "'sasl_oauth_token_provider' must have a 'token(self) -> str' method, "
                "'async def' (aiokafka's AbstractTokenProvider) or not (kafka-python's)"
            )
        fetcher = _ProviderFetch(provider)
        source = TokenSource(_ProviderFetch.SETTING, fetcher.blocking, fetcher)
        return OAuthBearerCredentials(source, "what 'sasl_oauth_token_provider' returns")
    if oidc:
        return _oidc_credentials(values, jaas, extensions)
    setting = "'sasl.oauthbearer.config'"
    if "unsecuredLoginStringClaim_sub" in jaas:
        options = {"principal": jaas["unsecuredLoginStringClaim_sub"]}
        setting = "'sasl.jaas.config'"
    else:
        try:
            options = parse_oauthbearer_config(config_text)
        except ValueError as exc:
            raise ConfigError(f"{setting}: {exc}") from None
    for key, value in extensions.items():
        options.setdefault(f"extension_{key}", value)
    source = TokenSource(setting, _unsecured_fetch(options, setting))
    return OAuthBearerCredentials(source, f"{setting} (principal, scope)")


def _oidc_credentials(
    values: Mapping[str, Any], jaas: Mapping[str, str], extensions: dict[str, str]
) -> OAuthBearerCredentials:
    url = values.get("sasl.oauthbearer.token.endpoint.url")
    client_id = values.get("sasl.oauthbearer.client.id") or jaas.get("clientId")
    secret = values.get("sasl.oauthbearer.client.secret") or jaas.get("clientSecret")
    scope = values.get("sasl.oauthbearer.scope") or jaas.get("scope")
    missing = [
        name
        for name, value in (
            ("'sasl.oauthbearer.token.endpoint.url'", url),
            ("'sasl.oauthbearer.client.id'", client_id),
            ("'sasl.oauthbearer.client.secret'", secret),
        )
        if not value
    ]
    if missing:
        raise ConfigError(f"OAUTHBEARER with OIDC needs {', '.join(missing)}")
    assert url is not None and client_id is not None and secret is not None
    try:
        fetcher = OidcTokenFetcher(
            url,
            client_id,
            secret,
            scope=scope,
            extensions=extensions,
            ssl_context=values.get("ssl.context"),
            connect_timeout_ms=values.get("sasl.login.connect.timeout.ms", 10_000),
            read_timeout_ms=values.get("sasl.login.read.timeout.ms", 10_000),
            retry_backoff_ms=values.get("sasl.login.retry.backoff.ms", 100),
            retry_backoff_max_ms=values.get("sasl.login.retry.backoff.max.ms", 10_000),
        )
    except OAuthTokenError as exc:
        raise ConfigError(str(exc)) from None
    source = TokenSource("'sasl.oauthbearer.token.endpoint.url'", fetcher)
    return OAuthBearerCredentials(
        source,
        "'sasl.oauthbearer.client.id', 'sasl.oauthbearer.client.secret' and "
        "'sasl.oauthbearer.scope' (the identity provider's token must be one the broker "
        "accepts: issuer, audience, signing keys)",
    )
