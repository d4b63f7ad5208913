"""Server-side KSelector: the sockets of one Processor (Kafka's ``Selector`` + ``KafkaChannel``).

Owned by exactly one Processor thread. Each ``ServerChannel`` holds at most one
``NetworkReceive`` (4-byte signed size, then exactly that many bytes: nothing past the end
of a request is read) and at most one ``NetworkSend`` (a list of buffers written with
``sendmsg``, i.e. by reference, no joining). A channel that has completed a receive is
muted (no read interest) until the Processor unmutes it after the response went out, so
a connection's requests are handled strictly one at a time, in order.

``poll()`` fills ``completed_receives``, ``completed_sends`` and ``disconnected``; the
Processor drains those lists. Closing a channel, for whatever reason, reports it in
``disconnected`` exactly once.
"""

from __future__ import annotations

import logging
import selectors
import socket
from collections.abc import Sequence

from kclient.waker import Waker

log = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview

_IOV_MAX = 1024
_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_WAKEUP = "<wakeup>"


class InvalidReceiveError(Exception):
    """A size prefix is negative or larger than ``socket.request.max.bytes``."""


class NetworkReceive:
    """One size-prefixed frame being read (Kafka's ``NetworkReceive``)."""

    __slots__ = ("_read", "_size", "_size_buf", "_view", "max_size", "payload")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._size_buf = bytearray(4)
        self._size = -1
        self._read = 0
        self.payload = bytearray()
        self._view = memoryview(self._size_buf)

    def read_from(self, sock: socket.socket) -> tuple[bool, int]:
        """Read what is available: (complete, bytes read). Raises EOFError when the peer
        closed, InvalidReceiveError for a bad size, OSError for socket errors."""
        total = 0
        while True:
            if self._size < 0:
                try:
                    n = sock.recv_into(self._view[self._read :])
                except BlockingIOError:
                    return False, total
                if n == 0:
                    raise EOFError("connection closed by peer")
                total += n
                self._read += n
                if self._read < 4:
                    continue
                size = int.from_bytes(self._size_buf, "big", signed=True)
                if size < 0 or size > self.max_size:
                    raise InvalidReceiveError(
                        f"invalid request size {size} (socket.request.max.bytes is {self.max_size})"
                    )
                self._size = size
                self._read = 0
                self.payload = bytearray(size)
                self._view = memoryview(self.payload)
                if size == 0:
                    return True, total
            else:
                try:
                    n = sock.recv_into(self._view[self._read :])
                except BlockingIOError:
                    return False, total
                if n == 0:
                    raise EOFError("connection closed by peer in the middle of a request")
                total += n
                self._read += n
                if self._read == self._size:
                    self._view.release()
                    return True, total

    @property
    def started(self) -> bool:
        return self._size >= 0 or self._read > 0


class NetworkSend:
    """One response being written from a list of buffers (Kafka's ``NetworkSend``)."""

    __slots__ = ("_views", "destination", "remaining", "size")

    def __init__(self, destination: str, buffers: Sequence[Buffer]) -> None:
        self.destination = destination
        self._views = [memoryview(b).cast("B") for b in buffers if len(b)]
        self.size = sum(len(v) for v in self._views)
        self.remaining = self.size

    def write_to(self, sock: socket.socket) -> tuple[bool, int]:
        """Write what the socket takes: (complete, bytes written)."""
        written = 0
        views = self._views
        while views:
            try:
                n = sock.sendmsg(views[:_IOV_MAX])
            except BlockingIOError:
                break
            written += n
            self.remaining -= n
            while n:
                first = views[0]
                if n >= len(first):
                    n -= len(first)
                    views.pop(0)
                else:
                    views[0] = first[n:]
                    n = 0
        return not views, written


class ServerChannel:
    """One client connection (Kafka's ``KafkaChannel``)."""

    __slots__ = (
        "events",
        "id",
        "last_active_ns",
        "muted",
        "peer",
        "receive",
        "send",
        "sock",
    )

    def __init__(self, channel_id: str, sock: socket.socket, peer: str, now_ns: int) -> None:
        self.id = channel_id
        self.sock = sock
        self.peer = peer
        self.muted = False
        self.receive: NetworkReceive | None = None
        self.send: NetworkSend | None = None
        self.events = 0
        self.last_active_ns = now_ns


class ServerSelector:
    """All connections of one Processor over one ``selectors`` selector."""

    def __init__(self, max_receive_size: int, connections_max_idle_ms: int = 600_000) -> None:
        self.max_receive_size = max_receive_size
        self._idle_ns = connections_max_idle_ms * 1_000_000
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

    def register(self, channel_id: str, sock: socket.socket, peer: str, now_ns: int) -> None:
        if channel_id in self.channels:
            raise ValueError(f"channel {channel_id} is already registered")
        sock.setblocking(False)
        channel = ServerChannel(channel_id, sock, peer, now_ns)
        self.channels[channel_id] = channel
        self._update_interest(channel)

    def channel(self, channel_id: str) -> ServerChannel | None:
        return self.channels.get(channel_id)

    def _update_interest(self, ch: ServerChannel) -> None:
        wanted = (0 if ch.muted else _READ) | (_WRITE if ch.send is not None else 0)
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
        ch = self.channels.get(channel_id)
        if ch is not None and ch.muted:
            ch.muted = False
            self._update_interest(ch)

    def send(self, channel_id: str, buffers: Sequence[Buffer], now_ns: int) -> bool:
        """Start writing a response; tries right away, then waits for writability.

        Returns False when the channel is gone (closed meanwhile).
        """
        ch = self.channels.get(channel_id)
        if ch is None:
            return False
        if ch.send is not None:
            raise RuntimeError(f"channel {channel_id} already has a send in progress")
        send = NetworkSend(channel_id, buffers)
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
        per channel, continue pending writes, close broken and idle connections."""
        for key, events in self._sel.select(timeout_s):
            channel_id = key.data
            if channel_id == _WAKEUP:
                self._drain_wakeup()
                continue
            ch = self.channels.get(channel_id)
            if ch is None:
                continue
            if events & _WRITE and ch.send is not None:
                self._write(ch)
                if ch.id not in self.channels:
                    continue
            if events & _READ and not ch.muted:
                self._read(ch, now_ns)
            if ch.id in self.channels:
                self._update_interest(ch)
        if now_ns >= self._next_idle_check_ns:
            self._close_idle(now_ns)
            self._next_idle_check_ns = now_ns + 1_000_000_000

    def _read(self, ch: ServerChannel, now_ns: int) -> None:
        if ch.receive is None:
            ch.receive = NetworkReceive(self.max_receive_size)
        try:
            complete, n = ch.receive.read_from(ch.sock)
        except EOFError as exc:
            reason = str(exc) if ch.receive.started else "connection closed by peer"
            self.close(ch.id, reason)
            return
        except InvalidReceiveError as exc:
            log.warning("closing connection %s from %s: %s", ch.id, ch.peer, exc)
            self.close(ch.id, str(exc))
            return
        except OSError as exc:
            self.close(ch.id, f"read failed: {exc}")
            return
        self.bytes_in += n
        ch.last_active_ns = now_ns
        if complete:
            self.completed_receives.append((ch.id, ch.receive.payload))
            ch.receive = None
            ch.muted = True  # one request at a time; the Processor unmutes after responding

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
        for ch in list(self.channels.values()):
            if ch.last_active_ns < deadline and not ch.muted and ch.send is None:
                log.info("closing idle connection %s from %s", ch.id, ch.peer)
                self.close(ch.id, "idle for connections.max.idle.ms")
