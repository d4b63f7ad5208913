"""Non-blocking socket I/O for many broker connections: Kafka's ``Selector`` (``KSelector``).

Owned by one thread, the one that owns the ``NetworkClient`` (the producer's Sender
thread). Only ``wakeup()`` may be called from other threads.

``KSelector`` wraps ``selectors.DefaultSelector``. Each node has one ``KafkaChannel``
holding at most one in-progress ``NetworkSend`` (a second ``send`` before the first is
written is an ``IllegalStateError``) and the partial receive. ``poll(timeout_ms)`` performs
every connect, read and write, and fills four result lists that stay valid until the next
poll: ``completed_sends``, ``completed_receives``, ``connected`` and ``disconnected``.

Sends and receives are in ``channel.py``, opening a connection (``connect``, ``register``)
in ``selector_connect.py``. ``send`` writes at once as much as the socket takes (unlike
Java's, which only queues), so a request is on the wire while the caller still does its
bookkeeping; what it finished or broke is reported by the next ``poll``.
The rest of a send is written at the start of each ``poll`` and then on writability. A
request written whole waits in the same poll for its response (one poll per round trip),
unless its send says no response will come (``awaits_response=False``, acks=0). A
response size above ``max_receive_bytes`` (``receive.message.max.bytes``: a broken or
hostile broker, or garbage from a port that doesn't speak Kafka) closes the connection
with ``ProtocolDecodeError``; below it, a response's buffer grows only as its bytes
arrive (see ``channel.py``). Connections
idle longer than ``connections.max.idle.ms`` are closed (one per poll, least recently used
first).

With an ``ssl_context`` every connection runs TLS: a channel counts as connected (and is
reported in ``connected``) only once its handshake completed, within the same connection
setup timeout; a failed handshake is a disconnect whose error says why and which
``ssl.*`` setting to check.

Every ``OSError`` is caught here and reported in ``disconnected`` as a ``KafkaError`` that
names the node and its address. Nothing above this module touches sockets.
"""

from __future__ import annotations

import logging
import selectors
import ssl
import threading

from kclient.clock import Clock
from kclient.errors import IllegalStateError, KafkaConnectionError, KafkaError, ProtocolDecodeError
from kclient.network.channel import (
    KafkaChannel,
    NetworkReceive,
    NetworkSend,
    PeerClosedError,
    describe_os_error,
    format_address,
)
from kclient.network.idle_expiry import IdleExpiryManager
from kclient.network.selectable import Selectable
from kclient.network.selector_connect import SelectorConnect, connect_error
from kclient.waker import Waker

log = logging.getLogger(__name__)

#: librdkafka's ``receive.message.max.bytes`` default: above any answer a producer gets
#: (Metadata for a topic of 300,000 partitions is 8 to 13 MB), and above Kafka's
#: ``fetch.max.bytes`` default (50 MiB).
DEFAULT_RECEIVE_MESSAGE_MAX_BYTES = 100_000_000
_MAX_SELECT_TIMEOUT_MS = 3_600_000

__all__ = [
    "DEFAULT_RECEIVE_MESSAGE_MAX_BYTES",
    "IdleExpiryManager",
    "KSelector",
    "KafkaChannel",
    "NetworkReceive",
    "NetworkSend",
    "Selectable",
    "Waker",
    "describe_os_error",
    "format_address",
]


class KSelector(SelectorConnect):
    """``Selectable`` over real sockets and ``selectors.DefaultSelector``."""

    __slots__ = (
        "_channels",
        "_clock",
        "_closed",
        "_early_failures",
        "_early_sends",
        "_idle",
        "_immediately_connected",
        "_max_receive_bytes",
        "_prefix",
        "_receive_buffer_bytes",
        "_selector",
        "_send_buffer_bytes",
        "_sending",
        "_ssl_context",
        "_waker",
        "completed_receives",
        "completed_sends",
        "connected",
        "disconnected",
        "release_before_select",
    )

    def __init__(
        self,
        clock: Clock,
        *,
        connections_max_idle_ms: int = 540_000,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = 32_768,
        max_receive_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
        log_prefix: str = "",
        ssl_context: ssl.SSLContext | None = None,
        selector: selectors.BaseSelector | None = None,
    ) -> None:
        """``selector``: the readiness source (``selectors.DefaultSelector()`` if None; an
        event loop's, ``kclient.aio.loop_selector``, to run on that loop instead)."""
        self._clock = clock
        self._ssl_context = ssl_context
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._max_receive_bytes = max_receive_bytes
        self._prefix = log_prefix
        self._selector = selector if selector is not None else selectors.DefaultSelector()
        self._channels: dict[int, KafkaChannel] = {}
        self._sending: dict[int, KafkaChannel] = {}  # channels with a send not fully written
        self._immediately_connected: list[KafkaChannel] = []
        # What ``send`` itself completed or broke (it writes at once); the next poll reports it.
        self._early_sends: list[NetworkSend] = []
        self._early_failures: dict[int, KafkaError] = {}
        self._idle = IdleExpiryManager(connections_max_idle_ms)
        self._waker = Waker()
        self._selector.register(self._waker.fileno(), selectors.EVENT_READ, None)
        self._closed = False
        self.completed_sends: list[NetworkSend] = []
        self.completed_receives: list[NetworkReceive] = []
        self.connected: list[int] = []
        self.disconnected: dict[int, KafkaError] = {}
        self.release_before_select: list[threading.Lock] = []

    # ---- connections (connect and register: SelectorConnect) ---------------------------

    def is_channel_ready(self, node_id: int) -> bool:
        channel = self._channels.get(node_id)
        return channel is not None and channel.connected

    def channel(self, node_id: int) -> KafkaChannel | None:
        return self._channels.get(node_id)

    def close(self, node_id: int | None = None) -> None:
        if node_id is not None:
            channel = self._channels.get(node_id)
            if channel is not None:
                self._close_channel(channel)
            return
        if self._closed:
            return
        self._closed = True
        for channel in list(self._channels.values()):
            self._close_channel(channel)
        self._selector.close()
        self._waker.close()

    # ---- I/O --------------------------------------------------------------------------

    def send(self, send: NetworkSend) -> None:
        channel = self._channels.get(send.destination)
        if channel is None:
            raise IllegalStateError(f"cannot send to node {send.destination}: not connected")
        if channel.send is not None:
            raise IllegalStateError(
                f"node {send.destination} still has a send in progress; one send at a time"
            )
        channel.send = send
        self._sending[send.destination] = channel
        if channel.connected:  # write now: the request is on the wire before poll is called
            self._attempt_write(channel, self._early_sends, self._early_failures)
            if self._channels.get(channel.node_id) is channel:  # not closed by a failed write
                self._idle.update(channel.node_id, self._clock.monotonic_ms())

    def mute(self, node_id: int) -> None:
        channel = self._channels.get(node_id)
        if channel is not None:
            channel.muted = True
            self._set_interest(channel)

    def unmute(self, node_id: int) -> None:
        channel = self._channels.get(node_id)
        if channel is not None:
            channel.muted = False
            self._set_interest(channel)

    def wakeup(self) -> None:
        self._waker.wake()

    def poll(self, timeout_ms: int) -> None:
        if self._closed:
            raise IllegalStateError("the selector is closed")
        # Fresh result lists only when the last poll filled them (callers may keep them).
        if self.completed_sends:
            self.completed_sends = []
        if self.completed_receives:
            self.completed_receives = []
        if self.connected:
            self.connected = []
        if self.disconnected:
            self.disconnected = {}
        if self._immediately_connected:
            for connected in self._immediately_connected:
                if self._channels.get(connected.node_id) is connected:
                    self.connected.append(connected.node_id)
            self._immediately_connected = []
        if self._early_sends:
            self.completed_sends, self._early_sends = self._early_sends, []
        if self._early_failures:
            self.disconnected, self._early_failures = self._early_failures, {}
        # Write pending sends at once rather than waiting a select round for writability.
        if self._sending:
            write_ms = self._clock.monotonic_ms()
            for pending in list(self._sending.values()):
                if pending.connected:
                    self._idle.update(pending.node_id, write_ms)
                    self._attempt_write(pending, self.completed_sends, self.disconnected)
        # A write that completes a request (acks=0) is news for the caller.
        for send in self.completed_sends:
            if not send.awaits_response:
                timeout_ms = 0
                break
        # A new connection or a failure is news too: return at once. A request written
        # whole waits in this same poll for its response.
        if self.connected or self.disconnected:
            timeout_ms = 0
        timeout_ms = min(timeout_ms, _MAX_SELECT_TIMEOUT_MS)
        if self.release_before_select:
            release_all(self.release_before_select)
        events = self._selector.select(timeout_ms / 1000.0 if timeout_ms > 0 else 0)
        if not events:
            self._maybe_close_idle(self._clock.monotonic_ms())
            return
        now_ms = self._clock.monotonic_ms()
        channels = self._channels
        for key, mask in events:
            channel: KafkaChannel | None = key.data  # None: the waker
            if channel is None:
                self._drain_wakeup()
                continue
            if channels.get(channel.node_id) is not channel:
                continue  # closed while handling an earlier event
            self._idle.update(channel.node_id, now_ms)
            self._handle_events(channel, mask)
            if channels.get(channel.node_id) is channel:
                self._set_interest(channel)
        self._maybe_close_idle(now_ms)

    def _handle_events(self, channel: KafkaChannel, mask: int) -> None:
        try:
            if not channel.connected:
                if mask & (selectors.EVENT_WRITE | selectors.EVENT_READ):
                    wrapping = channel.tls_context is not None and not channel.tls_wait
                    if wrapping:  # TCP may be up now: the TLS socket replaces the plain one
                        self._selector.unregister(channel.sock)
                        channel.events = 0
                    channel.finish_connect()
                    if channel.connected:
                        self.connected.append(channel.node_id)
                return
            if mask & selectors.EVENT_READ and not channel.muted:
                channel.read(self.completed_receives)
            if mask & selectors.EVENT_WRITE and channel.send is not None:
                send = channel.write()
                if send is not None:
                    del self._sending[channel.node_id]
                    self.completed_sends.append(send)
        except (PeerClosedError, ProtocolDecodeError, OSError) as exc:
            self._io_failed(channel, exc)

    def _io_failed(self, channel: KafkaChannel, exc: Exception) -> None:
        """A read or write of ``channel`` in ``poll`` failed: close it and say why."""
        error: KafkaError
        if isinstance(exc, PeerClosedError):
            error = KafkaConnectionError(
                f"node {channel.node_id} at {channel.address} closed the connection"
            )
        elif isinstance(exc, ProtocolDecodeError):
            error = exc
        else:
            assert isinstance(exc, OSError)
            error = _io_error(channel, exc)
        self._fail(channel, error)

    def _attempt_write(
        self,
        channel: KafkaChannel,
        completed: list[NetworkSend],
        failed: dict[int, KafkaError],
    ) -> None:
        try:
            send = channel.write()
        except OSError as exc:
            self._write_failed(channel, exc, failed)
            return
        if send is not None:
            del self._sending[channel.node_id]
            completed.append(send)
        else:
            self._set_interest(channel)  # the rest waits for writability

    def _write_failed(
        self, channel: KafkaChannel, exc: OSError, failed: dict[int, KafkaError]
    ) -> None:
        self._close_channel(channel)
        failed[channel.node_id] = _io_error(channel, exc)

    def _drain_wakeup(self) -> None:
        self._waker.drain()

    def _maybe_close_idle(self, now_ms: int) -> None:
        node_id = self._idle.poll_expired(now_ms)
        if node_id is None:
            return
        channel = self._channels.get(node_id)
        if channel is None:
            self._idle.remove(node_id)
            return
        log.debug(
            "%sclosing connection to node %d at %s: idle longer than %d ms",
            self._prefix,
            node_id,
            channel.address,
            self._idle.connections_max_idle_ms,
        )
        self._fail(
            channel,
            KafkaConnectionError(
                f"closed idle connection to node {node_id} at {channel.address} "
                f"(idle longer than connections.max.idle.ms={self._idle.connections_max_idle_ms})"
            ),
        )

    # ---- bookkeeping --------------------------------------------------------------------

    def _fail(self, channel: KafkaChannel, error: KafkaError) -> None:
        self._close_channel(channel)
        self.disconnected[channel.node_id] = error

    def _close_channel(self, channel: KafkaChannel) -> None:
        if self._channels.get(channel.node_id) is channel:
            del self._channels[channel.node_id]
        self._idle.remove(channel.node_id)
        self._sending.pop(channel.node_id, None)
        if channel.events:
            self._selector.unregister(channel.sock)
            channel.events = 0
        channel.sock.close()
        channel.send = None
        channel.receive = None

    def _set_interest(self, channel: KafkaChannel) -> None:
        events = 0
        if channel.tls_wait:  # TLS handshake: what it waits for
            events = channel.tls_wait
        elif not channel.connected or channel.send is not None:
            events |= selectors.EVENT_WRITE
        if channel.connected and not channel.muted:
            events |= selectors.EVENT_READ
        if events == channel.events:
            return
        if channel.events == 0:
            self._selector.register(channel.sock, events, channel)
        elif events == 0:
            self._selector.unregister(channel.sock)
        else:
            self._selector.modify(channel.sock, events, channel)
        channel.events = events


def release_all(gates: list[threading.Lock]) -> None:
    """Release every lock in ``gates`` and empty the list (in place: it is shared)."""
    for gate in gates:
        gate.release()
    gates.clear()


def _io_error(channel: KafkaChannel, exc: OSError) -> KafkaConnectionError:
    if not channel.connected:
        return connect_error(channel.node_id, channel.address, exc)
    return KafkaConnectionError(
        f"connection to node {channel.node_id} at {channel.address} lost: {describe_os_error(exc)}"
    )
