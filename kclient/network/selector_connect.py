"""Opening a connection in ``KSelector`` (``kclient/network/selector.py``): ``connect`` (a
non-blocking TCP connect, with the TLS handshake's first step when it connected at once) and
``register`` (an already connected socket). ``SelectorConnect`` is a base class of
``KSelector``.

Owned by the ``KSelector``'s thread (or the event loop's), like the selector.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from kclient.errors import IllegalStateError, KafkaConnectionError
from kclient.network.channel import (
    CONNECT_IN_PROGRESS,
    KafkaChannel,
    describe_os_error,
    format_address,
)

if TYPE_CHECKING:
    import ssl

    from kclient.clock import Clock
    from kclient.network.idle_expiry import IdleExpiryManager

__all__ = ["SelectorConnect", "connect_error"]


class SelectorConnect:
    """``connect`` and ``register`` of ``KSelector`` (see the module docstring)."""

    # set by KSelector.__init__
    _channels: dict[int, KafkaChannel]
    _clock: Clock
    _idle: IdleExpiryManager
    _immediately_connected: list[KafkaChannel]
    _max_receive_bytes: int
    _receive_buffer_bytes: int
    _send_buffer_bytes: int
    _ssl_context: ssl.SSLContext | None

    def _close_channel(self, channel: KafkaChannel) -> None:
        raise NotImplementedError  # KSelector's

    def _set_interest(self, channel: KafkaChannel) -> None:
        raise NotImplementedError  # KSelector's

    def connect(
        self,
        node_id: int,
        host: str,
        port: int,
        family: int | None = None,
        server_hostname: str | None = None,
    ) -> None:
        if node_id in self._channels:
            raise IllegalStateError(f"there is already a connection to node {node_id}")
        address = format_address(host, port)
        if family is None:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self._send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
            if self._receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            code = sock.connect_ex((host, port))
        except OSError as exc:
            sock.close()
            raise connect_error(node_id, address, exc) from exc
        if code != 0 and code not in CONNECT_IN_PROGRESS:
            sock.close()
            failure = OSError(code, os.strerror(code))
            raise connect_error(node_id, address, failure) from failure
        channel = KafkaChannel(
            node_id,
            sock,
            address,
            self._max_receive_bytes,
            tls_context=self._ssl_context,
            tls_hostname=server_hostname or host,
        )
        self._channels[node_id] = channel
        self._idle.update(node_id, self._clock.monotonic_ms())
        if code == 0:
            if self._ssl_context is None:
                channel.connected = True
                self._immediately_connected.append(channel)
            else:  # the handshake's first step goes out now; its answer comes in a poll
                try:
                    channel.tcp_connected()
                except OSError as exc:
                    self._close_channel(channel)
                    raise connect_error(node_id, address, exc) from exc
        self._set_interest(channel)

    def register(self, node_id: int, sock: socket.socket, address: str = "") -> None:
        """Adopt an already connected socket (tests use it for socket pairs)."""
        if node_id in self._channels:
            raise IllegalStateError(f"there is already a connection to node {node_id}")
        sock.setblocking(False)
        channel = KafkaChannel(
            node_id, sock, address or str(sock.getpeername()), self._max_receive_bytes
        )
        channel.connected = True
        self._channels[node_id] = channel
        self._idle.update(node_id, self._clock.monotonic_ms())
        self._set_interest(channel)


def connect_error(node_id: int, address: str, exc: OSError) -> KafkaConnectionError:
    return KafkaConnectionError(
        f"connection to node {node_id} at {address} failed: {describe_os_error(exc)}"
    )
