"""Where OAUTHBEARER tokens come from and when they are refreshed: Kafka's
``ExpiringCredentialRefreshingLogin`` and ``OAuthBearerLoginModule`` (KIP-255, KIP-368).

``TokenSource`` keeps the current token of one producer. The ``NetworkClient``'s thread
(through the authenticator) asks it for a token when an exchange starts and calls
``maintain(now_ms)`` when ``refresh_due_ms`` comes: at 80-85% of the token's lifetime (Java's
``sasl.login.refresh.window.factor`` 0.8 plus up to ``.jitter`` 0.05), a refresh starts *in
the background* (a one-shot daemon thread for a blocking fetcher, a task on the producer's
event loop for an async one) so that sends never wait for it; the connections then
re-authenticate with the new token when their sessions are due (KIP-368). Only the first
token, when none is cached yet, is fetched on the calling thread (bounded by the fetcher's
own timeouts), or awaited by ``kclient.aio``'s ``start()``.

``OAuthBearerCredentials`` is the ``sasl.mechanism=OAUTHBEARER`` side of the producer's
settings: one of a callable (``oauth_cb``), the OIDC client-credentials grant
(``sasl.oauthbearer.method=oidc``) or unsecured JWTs (``enable.sasl.oauthbearer.unsecure.jwt``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Awaitable, Callable
from typing import NoReturn

from kclient.oauth.token import (
    OAuthBearerMechanism,
    OAuthBearerToken,
    OAuthTokenError,
    now_wall_ms,
)

log = logging.getLogger(__name__)

NEVER_MS = 2**63 - 1
REFRESH_WINDOW_FACTOR = 0.8
REFRESH_WINDOW_JITTER = 0.05
#: A token with less than this part of its lifetime left is not sent while a blocking
#: fetcher can get a new one.
LAST_RESORT_FRACTION = 0.1

#: A blocking fetch: the current wall-clock ms → a new token (or ``OAuthTokenError``).
Fetch = Callable[[int], OAuthBearerToken]
#: An async fetch, run on the producer's event loop.
AsyncFetch = Callable[[int], Awaitable[OAuthBearerToken]]


class TokenSource:
    """The current token, and its background refresh. Thread-safe: the refresh runs on
    another thread (or the loop) and swaps the token in under a lock.

    ``fetch`` or ``async_fetch`` gets a token; ``setting`` names what to fix when it fails.
    ``wall_ms`` reads the wall clock (tokens expire in wall-clock time); ``spawn`` starts a
    blocking refresh in the background (tests run it inline)."""

    def __init__(
        self,
        setting: str,
        fetch: Fetch | None = None,
        async_fetch: AsyncFetch | None = None,
        *,
        wall_ms: Callable[[], int] = now_wall_ms,
        rng: random.Random | None = None,
        spawn: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        if fetch is None and async_fetch is None:
            raise ValueError("give fetch, async_fetch or both")
        self.setting = setting
        self._fetch = fetch
        self._async_fetch = async_fetch
        self._wall_ms = wall_ms
        self._rng = rng or random.Random()
        self._spawn = spawn or _daemon_thread
        self._lock = threading.Lock()
        self._token: OAuthBearerToken | None = None
        self._refreshing = False
        self._last_error: OAuthTokenError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None  # kclient.aio's loop, with a blocking fetcher
        #: wall-clock ms when a refresh is due (NEVER_MS: no token yet, or refreshing)
        self.refresh_due_ms = NEVER_MS

    def __repr__(self) -> str:
        return f"TokenSource({self.setting})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a TokenSource holds a token and is not pickled")

    def wall_ms(self) -> int:
        return self._wall_ms()

    def refresh_delay_ms(self) -> int:
        """ms until a refresh is due (0: now; ``NEVER_MS``: none is; a second while one
        runs, to schedule the next once it is done)."""
        if self._refreshing:
            return 1000
        due = self.refresh_due_ms
        return NEVER_MS if due == NEVER_MS else max(due - self._wall_ms(), 0)

    def current(self) -> OAuthBearerToken:
        """A token that has not expired: the cached one, or a new one fetched now on this
        thread (not once an event loop runs the fetches: ``start``). ``OAuthTokenError``
        if none can be had."""
        now_ms = self._wall_ms()
        with self._lock:
            token = self._token
        if token is not None and token.expiry_ms > now_ms:
            left_ms = token.expiry_ms - now_ms
            # nearly expired (the background refresh is late): a blocking fetcher fetches
            # now rather than send a token that may expire before the broker checks it
            if (
                left_ms >= token.lifetime_ms * LAST_RESORT_FRACTION
                or self._fetch is None
                or self._on_loop
            ):
                self.maintain(now_ms)
                return token
        if self._fetch is None or self._on_loop:
            self.maintain(now_ms)  # a refresh in the background, if none runs yet
            error = self._last_error
            raise OAuthTokenError(
                f"no token from {self.setting}"
                + (f": {error}" if error is not None else " yet")
                + ("" if token is None else " (the last one expired)")
            )
        try:
            return self._install(self._fetch(now_ms))
        except OAuthTokenError:
            raise
        except Exception as exc:
            raise OAuthTokenError(f"{self.setting} raised {type(exc).__name__}") from exc

    @property
    def _on_loop(self) -> bool:
        """Fetches may not run on this thread: an async fetcher's loop runs them, and the
        loop of ``kclient.aio`` is never blocked by a blocking one."""
        if self._async_fetch is not None and self._loop is not None:
            return True
        return threading.get_ident() == self._loop_thread

    def maintain(self, now_ms: int) -> None:
        """Start a background refresh if one is due (wall-clock ``now_ms``)."""
        with self._lock:
            if self._refreshing or now_ms < self.refresh_due_ms:
                return
            self._refreshing = True
            self.refresh_due_ms = NEVER_MS
        log.debug("refreshing the OAUTHBEARER token (%s)", self.setting)
        loop = self._loop
        if self._on_loop and loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._refresh_async(now_ms), loop)
        elif self._fetch is not None:
            self._spawn(lambda: self._refresh(now_ms))
        else:
            with self._lock:
                self._refreshing = False

    async def start(self) -> None:
        """``kclient.aio``'s ``start()``: the first token, awaited (a blocking fetcher runs
        in a worker thread so the loop does not wait); an async fetcher's refreshes then
        run on this loop."""
        if self._async_fetch is not None:
            self._loop = asyncio.get_running_loop()
            self._install(await self._async_fetch(self._wall_ms()))
        elif self._fetch is not None:
            self._loop_thread = threading.get_ident()
            fetch = self._fetch
            self._install(await asyncio.to_thread(fetch, self._wall_ms()))

    def _refresh(self, now_ms: int) -> None:
        assert self._fetch is not None
        try:
            self._install(self._fetch(now_ms))
        except OAuthTokenError as exc:
            self._failed(exc)
        except Exception as exc:
            self._failed(OAuthTokenError(f"{self.setting} raised {type(exc).__name__}"))

    async def _refresh_async(self, now_ms: int) -> None:
        assert self._async_fetch is not None
        try:
            self._install(await self._async_fetch(now_ms))
        except OAuthTokenError as exc:
            self._failed(exc)
        except Exception as exc:
            self._failed(OAuthTokenError(f"{self.setting} raised {type(exc).__name__}"))

    def _failed(self, error: OAuthTokenError) -> None:
        with self._lock:
            self._last_error = error
            self._refreshing = False
            token = self._token
            now_ms = self._wall_ms()
            # again in 10 s, or halfway to the current token's expiry if sooner
            delay_ms = 10_000
            if token is not None:
                delay_ms = min(delay_ms, max((token.expiry_ms - now_ms) // 2, 1000))
            self.refresh_due_ms = now_ms + delay_ms
        log.warning(
            "refreshing the OAUTHBEARER token failed (again in %.1f s): %s", delay_ms / 1000, error
        )

    def _install(self, token: OAuthBearerToken) -> OAuthBearerToken:
        factor = REFRESH_WINDOW_FACTOR + self._rng.uniform(0, REFRESH_WINDOW_JITTER)
        with self._lock:
            self._token = token
            self._refreshing = False
            self._last_error = None
            self.refresh_due_ms = token.start_ms + int(token.lifetime_ms * factor)
        log.debug(
            "OAUTHBEARER token for %r valid for %d s; refresh in %d s",
            token.principal,
            token.lifetime_ms // 1000,
            (self.refresh_due_ms - token.start_ms) // 1000,
        )
        return token


def _daemon_thread(target: Callable[[], None]) -> None:
    threading.Thread(target=target, name="kclient-oauth-refresh", daemon=True).start()


class OAuthBearerCredentials:
    """``sasl.mechanism=OAUTHBEARER``: the token source the producer's connections use."""

    mechanism = "OAUTHBEARER"

    def __init__(self, source: TokenSource, settings_hint: str) -> None:
        self.source = source
        #: the settings to check when the broker refuses the token
        self.settings_hint = f"check {settings_hint}"

    def __repr__(self) -> str:
        return f"OAuthBearerCredentials({self.source.setting})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("OAuthBearerCredentials hold a token source and are not pickled")

    def __copy__(self) -> OAuthBearerCredentials:
        return self

    def __deepcopy__(self, memo: object) -> OAuthBearerCredentials:
        return self

    @property
    def username(self) -> str:
        """The principal of the current token, for log lines (may be empty)."""
        token = self.source._token
        return token.principal if token is not None else ""

    def new_exchange(self, host: str = "") -> OAuthBearerMechanism:
        """A fresh exchange with the current token (the same token for any ``host``)."""
        return OAuthBearerMechanism(self.source.current())

    def maintenance_delay_ms(self) -> int:
        """How long until ``maintain`` should run (``NEVER_MS``: nothing to do)."""
        return self.source.refresh_delay_ms()

    def maintain(self) -> None:
        self.source.maintain(self.source.wall_ms())
