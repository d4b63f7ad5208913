"""Server-side KSelector: the sockets of one Processor (Kafka's ``Selector`` + ``KafkaChannel``).

Owned by exactly one Processor thread. Each ``ServerChannel`` (``server_channel.py``)
holds at most one ``NetworkReceive`` (``network_receive``: 4-byte signed size, then
exactly that many bytes, read into a buffer that grows as they arrive) and at most one
``NetworkSend`` (a list of buffers written with ``sendmsg``, i.e. by reference, no
joining). A channel that has completed a receive is muted (no read interest) until the
Processor unmutes it after the response went out, so a connection's requests are handled
strictly one at a time, in order.

The bytes of a request count against the broker's ``MemoryPool``
(``queued.max.request.bytes``) from its first chunk until the channel is unmuted (the
answer went out) or closed. A receive that stops because the pool is used up mutes its
channel for memory; every poll reads such channels again once the pool has room (polling
at least every 50 ms meanwhile).

``poll()`` fills ``completed_receives``, ``completed_sends`` and ``disconnected``; the
Processor drains those lists. Closing a channel, for whatever reason, reports it in
``disconnected`` exactly once.

TLS channels (an ``ssl.SSLSocket`` registered unconnected, ``do_handshake_on_connect=False``)
pick their path once, at ``register``: first the handshake, driven by the readiness it
waits for (no request is read before it completes; failures close only that connection,
with one log line); then ``TlsNetworkReceive`` / ``TlsNetworkSend``. Decrypted bytes left
inside the TLS object after a complete request are invisible to ``select``: such channels
are remembered and read again, without waiting, once unmuted. Plaintext channels keep
the plain ``recv_into`` / ``sendmsg`` path.

SASL channels (registered with a ``SaslSession``) read frames of at most
``sasl.server.max.receive.size`` until the Processor reports them ``authenticated``, and
must authenticate within the handshake timeout (counted from the end of the TLS
handshake, if any); the session itself is driven by the Processor. With
``connections.max.reauth.ms`` an authenticated channel keeps its session
(``reauth_session``), and is back under those limits while it re-authenticates
(``reauthenticating``).
"""

from __future__ import annotations

import logging
import selectors
import socket
import ssl
from collections.abc import Sequence
from typing import cast

from kclient.broker.network_receive import InvalidReceiveError, MemoryPool
from kclient.broker.sasl_session import SaslSession
from kclient.broker.server_channel import (
    _PEER_GONE,
    Buffer,
    NetworkSend,
    ServerChannel,
    handshake_failure,
)
from kclient.tls import handshake_step, has_pending
from kclient.waker import Waker

log = logging.getLogger(__name__)

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_WAKEUP = "<wakeup>"
#: How often channels waiting for room in the memory pool are read again (at most).
_MEMORY_RETRY_S = 0.05
#: Longest a TLS handshake, or a SASL authentication, may take (capped by
#: ``connections.max.idle.ms``).
HANDSHAKE_TIMEOUT_MS = 10_000


class ServerSelector:
    """All connections of one Processor over one ``selectors`` selector."""

    def __init__(
        self,
        max_receive_size: int,
        connections_max_idle_ms: int = 600_000,
        handshake_timeout_ms: int = HANDSHAKE_TIMEOUT_MS,
        pool: MemoryPool | None = None,
    ) -> None:
        self.max_receive_size = max_receive_size
        #: ``queued.max.request.bytes``, shared by the Processors of a broker
        self.pool = pool if pool is not None else MemoryPool(-1)
        #: channels whose receive waits for room in the pool
        self._memory_muted: set[str] = set()
        self._idle_ns = connections_max_idle_ms * 1_000_000
        self._handshake_ns = min(handshake_timeout_ms, connections_max_idle_ms) * 1_000_000
        #: TLS channels with decrypted bytes buffered in their SSL object.
        self._pending_reads: set[str] = set()
        self._sel = selectors.DefaultSelector()
        self.channels: dict[str, ServerChannel] = {}
        self.completed_receives: list[tuple[str, bytearray]] = []
        self.completed_sends: list[NetworkSend] = []
        self.disconnected: list[tuple[str, str]] = []
        self.bytes_in = 0
        self.bytes_out = 0
        self._waker: Waker | None = None
        self._next_idle_check_ns = 0

    # ---- registration ----------------------------------------------------------------

    def register_wakeup(self, waker: Waker) -> None:
        """A waker whose readability only means "wake up" (drained by ``poll``)."""
        self._waker = waker
        self._sel.register(waker.fileno(), _READ, _WAKEUP)

    def register(
        self,
        channel_id: str,
        sock: socket.socket,
        peer: str,
        now_ns: int,
        sasl: SaslSession | None = None,
    ) -> None:
        """Add a connection; an ``ssl.SSLSocket`` (server side, not yet handshaken) makes
        it a TLS channel, a ``sasl`` session a channel that must authenticate first."""
        if channel_id in self.channels:
            raise ValueError(f"channel {channel_id} is already registered")
        sock.setblocking(False)
        channel = ServerChannel(channel_id, sock, peer, now_ns, self.max_receive_size, sasl=sasl)
        if sasl is not None:
            sasl.deadline_ns = now_ns + self._handshake_ns
        self.channels[channel_id] = channel
        self._update_interest(channel)

    def authenticated(self, channel_id: str) -> None:
        """The channel's client has authenticated (SASL): any request, of any size, now.
        A session that expires stays with the channel (``reauth_session``)."""
        ch = self.channels.get(channel_id)
        if ch is not None:
            session = ch.sasl
            ch.sasl = None
            if session is not None and session.username:
                ch.principal = session.username
            ch.reauth_session = session if session is not None and session.expires else None
            ch.max_receive_size = self.max_receive_size

    def reauthenticating(self, channel_id: str, now_ns: int) -> None:
        """The authenticated channel's client started to re-authenticate (KIP-368): SASL
        frames only, of at most ``sasl.server.max.receive.size``, within the handshake
        timeout, until ``authenticated`` again."""
        ch = self.channels.get(channel_id)
        if ch is not None and ch.reauth_session is not None:
            session = ch.sasl = ch.reauth_session
            session.deadline_ns = now_ns + self._handshake_ns
            ch.max_receive_size = min(self.max_receive_size, session.max_receive_size)

    def channel(self, channel_id: str) -> ServerChannel | None:
        return self.channels.get(channel_id)

    def _update_interest(self, ch: ServerChannel) -> None:
        if ch.handshaking:
            wanted = ch.handshake_events
        else:
            reading = not (ch.muted or ch.memory_muted)
            wanted = (_READ if reading else 0) | (_WRITE if ch.send is not None else 0)
        if wanted == ch.events:
            return
        if ch.events == 0:
            self._sel.register(ch.sock, wanted, ch.id)
        elif wanted == 0:
            self._sel.unregister(ch.sock)
        else:
            self._sel.modify(ch.sock, wanted, ch.id)
        ch.events = wanted

    # ---- mute / send / close ---------------------------------------------------------

    def mute(self, channel_id: str) -> None:
        ch = self.channels.get(channel_id)
        if ch is not None and not ch.muted:
            ch.muted = True
            self._update_interest(ch)

    def unmute(self, channel_id: str) -> None:
        """Read the next request: the one before is answered (its bytes go back to the
        pool)."""
        ch = self.channels.get(channel_id)
        if ch is not None and ch.muted:
            ch.muted = False
            if ch.held_bytes:
                self.pool.release(ch.held_bytes, ch)
                ch.held_bytes = 0
            self._update_interest(ch)

    def release_request_memory(self, channel_id: str) -> None:
        """Give the answered request's bytes back to the pool while the channel stays
        muted (a throttled connection)."""
        ch = self.channels.get(channel_id)
        if ch is not None and ch.held_bytes:
            self.pool.release(ch.held_bytes, ch)
            ch.held_bytes = 0

    def send(self, channel_id: str, buffers: Sequence[Buffer], now_ns: int) -> bool:
        """Start writing a response; tries right away, then waits for writability.

        Returns False when the channel is gone (closed meanwhile).
        """
        ch = self.channels.get(channel_id)
        if ch is None:
            return False
        if ch.send is not None:
            raise RuntimeError(f"channel {channel_id} already has a send in progress")
        send = ch.send_type(channel_id, buffers)
        ch.send = send
        ch.last_active_ns = now_ns
        self._write(ch)
        if ch.id in self.channels:
            self._update_interest(ch)
        return True

    def close(self, channel_id: str, reason: str) -> None:
        ch = self.channels.pop(channel_id, None)
        if ch is None:
            return
        self._pending_reads.discard(channel_id)
        self._memory_muted.discard(channel_id)
        held = ch.held_bytes
        if ch.receive is not None:
            held += ch.receive.reserved
            ch.receive = None
        self.pool.release(held, ch)
        ch.held_bytes = 0
        if ch.events:
            try:
                self._sel.unregister(ch.sock)
            except (KeyError, ValueError):
                pass
        try:
            ch.sock.close()
        except OSError:
            pass
        self.disconnected.append((channel_id, reason))

    def close_all(self, reason: str = "shutting down") -> None:
        for channel_id in list(self.channels):
            self.close(channel_id, reason)
        if self._waker is not None:
            try:
                self._sel.unregister(self._waker.fileno())
            except (KeyError, ValueError):
                pass
        self._sel.close()

    # ---- poll ------------------------------------------------------------------------

    def poll(self, timeout_s: float, now_ns: int) -> None:
        """Wait up to ``timeout_s`` for I/O, then do it: read at most one complete request
        per channel, continue pending writes and TLS handshakes, close broken and idle
        connections. Does not wait when an unmuted TLS channel has buffered bytes."""
        buffered: list[ServerChannel] | None = None
        if self._memory_muted:
            self._retry_memory_muted(now_ns)
            if self._memory_muted:
                timeout_s = min(timeout_s, _MEMORY_RETRY_S)
        if self._pending_reads:
            buffered = self._unmuted_pending()
            if buffered:
                timeout_s = 0.0
        for key, events in self._sel.select(timeout_s):
            channel_id = key.data
            if channel_id == _WAKEUP:
                self._drain_wakeup()
                continue
            ch = self.channels.get(channel_id)
            if ch is None:
                continue
            if ch.handshaking:
                self._handshake(ch, now_ns)
                if ch.id in self.channels:
                    self._update_interest(ch)
                continue
            if events & _WRITE and ch.send is not None:
                self._write(ch)
                if ch.id not in self.channels:
                    continue
            if events & _READ and not (ch.muted or ch.memory_muted):
                self._read(ch, now_ns)
            if ch.id in self.channels:
                self._update_interest(ch)
        if buffered:
            for ch in buffered:
                # not read meanwhile through a socket event, still open and unmuted
                if (
                    ch.id in self._pending_reads
                    and not (ch.muted or ch.memory_muted)
                    and ch.id in self.channels
                ):
                    self._read(ch, now_ns)
                    if ch.id in self.channels:
                        self._update_interest(ch)
        if now_ns >= self._next_idle_check_ns:
            self._close_idle(now_ns)
            self._next_idle_check_ns = now_ns + 1_000_000_000

    def _retry_memory_muted(self, now_ns: int) -> None:
        """Read again the channels that waited for room in the pool."""
        waiting = self._memory_muted
        self._memory_muted = set()
        for channel_id in waiting:
            ch = self.channels.get(channel_id)
            if ch is None:
                continue
            ch.memory_muted = False
            self._read(ch, now_ns)
            if ch.id in self.channels:
                self._update_interest(ch)

    def _read(self, ch: ServerChannel, now_ns: int) -> None:
        if ch.receive is None:
            ch.receive = ch.receive_type(ch.max_receive_size, self.pool, ch)
        try:
            complete, n = ch.receive.read_from(ch.sock)
        except EOFError as exc:
            reason = str(exc) if ch.receive.started else "connection closed by peer"
            if ch.sasl is not None and ch.sasl.in_progress:
                log.info(
                    "SASL authentication of %s interrupted (connection %s, mechanism %s, "
                    "user %r): %s",
                    ch.peer,
                    ch.id,
                    ch.sasl.mechanism,
                    ch.sasl.username,
                    reason,
                )
            self.close(ch.id, reason)
            return
        except InvalidReceiveError as exc:
            why = str(exc)
            if ch.sasl is not None:
                why = (
                    f"invalid request size {exc.size} before SASL authentication "
                    f"(sasl.server.max.receive.size is {ch.max_receive_size})"
                )
            log.warning("closing connection %s from %s: %s", ch.id, ch.peer, why)
            self.close(ch.id, why)
            return
        except OSError as exc:
            self.close(ch.id, f"read failed: {exc}")
            return
        self.bytes_in += n
        if n:
            ch.last_active_ns = now_ns
        if complete:
            self.completed_receives.append((ch.id, ch.receive.payload))
            ch.held_bytes += ch.receive.reserved
            ch.receive = None
            ch.muted = True  # one request at a time; the Processor unmutes after responding
            if ch.tls:
                # the next request may already sit decrypted in the SSL object
                if has_pending(ch.sock):
                    self._pending_reads.add(ch.id)
                else:
                    self._pending_reads.discard(ch.id)
        elif ch.receive.waiting_for_memory:
            ch.memory_muted = True
            self._memory_muted.add(ch.id)
        elif ch.tls:
            self._pending_reads.discard(ch.id)  # read until the SSL object wanted more

    def _unmuted_pending(self) -> list[ServerChannel]:
        """TLS channels with buffered bytes that may be read now."""
        ready = []
        for channel_id in self._pending_reads:
            ch = self.channels.get(channel_id)
            if ch is not None and not ch.muted and not ch.memory_muted:
                ready.append(ch)
        return ready

    def _handshake(self, ch: ServerChannel, now_ns: int) -> None:
        """One non-blocking handshake step; once complete, read what came with it."""
        sock = cast(ssl.SSLSocket, ch.sock)
        try:
            waiting_for = handshake_step(sock)
        except (OSError, ValueError) as exc:
            reason = handshake_failure(exc)
            level = logging.INFO if isinstance(exc, _PEER_GONE) else logging.WARNING
            log.log(
                level, "TLS handshake with %s failed (connection %s): %s", ch.peer, ch.id, reason
            )
            self.close(ch.id, f"TLS handshake failed: {reason}")
            return
        if waiting_for:
            ch.handshake_events = waiting_for
            return
        ch.handshaking = False
        ch.last_active_ns = now_ns
        if ch.sasl is not None:  # the SASL exchange gets its own time, after TLS
            ch.sasl.deadline_ns = now_ns + self._handshake_ns
        log.debug("TLS handshake with %s complete (%s, %s)", ch.peer, sock.version(), sock.cipher())
        # the client's first request may have arrived with its last handshake flight
        self._read(ch, now_ns)

    def _write(self, ch: ServerChannel) -> None:
        send = ch.send
        assert send is not None
        try:
            complete, n = send.write_to(ch.sock)
        except OSError as exc:
            self.close(ch.id, f"write failed: {exc}")
            return
        self.bytes_out += n
        if complete:
            ch.send = None
            self.completed_sends.append(send)

    def _drain_wakeup(self) -> None:
        assert self._waker is not None
        self._waker.drain()

    def _close_idle(self, now_ns: int) -> None:
        deadline = now_ns - self._idle_ns
        handshake_deadline = now_ns - self._handshake_ns
        for ch in list(self.channels.values()):
            if ch.handshaking:
                if ch.last_active_ns < handshake_deadline:
                    seconds = self._handshake_ns / 1e9
                    log.warning(
                        "TLS handshake with %s failed (connection %s): not complete after %g s",
                        ch.peer,
                        ch.id,
                        seconds,
                    )
                    self.close(ch.id, f"TLS handshake not complete after {seconds:g} s")
            elif ch.sasl is not None and now_ns >= ch.sasl.deadline_ns:
                seconds = self._handshake_ns / 1e9
                # a failed exchange was logged already; its client did not read the answer
                log.log(
                    logging.DEBUG if ch.sasl.failed else logging.WARNING,
                    "SASL authentication of %s failed (connection %s, mechanism %s, user %r): "
                    "not complete after %g s",
                    ch.peer,
                    ch.id,
                    ch.sasl.mechanism,
                    ch.sasl.username,
                    seconds,
                )
                self.close(ch.id, f"SASL authentication not complete after {seconds:g} s")
            elif ch.last_active_ns < deadline and not ch.muted and ch.send is None:
                log.info("closing idle connection %s from %s", ch.id, ch.peer)
                self.close(ch.id, "idle for connections.max.idle.ms")
