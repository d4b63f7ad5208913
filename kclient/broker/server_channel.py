"""The embedded broker's connections: ``ServerChannel`` (one client connection's socket,
its current receive and send, and its TLS / SASL state) and the sends written to it
(``NetworkSend`` by ``sendmsg``, ``TlsNetworkSend`` in TLS-record chunks), with why a
server-side TLS handshake failed (``handshake_failure``). Kafka's ``KafkaChannel`` and
``NetworkSend``; driven by ``ServerSelector`` (``selector.py``) on one Processor thread.
"""

from __future__ import annotations

import selectors
import socket
import ssl
from collections import deque
from collections.abc import Sequence
from typing import cast

from kclient.broker.network_receive import NetworkReceive, TlsNetworkReceive
from kclient.broker.sasl_session import SaslSession
from kclient.tls import send_some, tls_chunks

Buffer = bytes | bytearray | memoryview

_IOV_MAX = 1024
_READ = selectors.EVENT_READ


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


class TlsNetworkSend(NetworkSend):
    """A response written through TLS (an ``SSLSocket`` has no ``sendmsg``): the buffers
    regrouped into chunks of at most 64 KiB, each retried unchanged after the socket was
    full, as OpenSSL requires."""

    __slots__ = ("_chunks",)

    def __init__(self, destination: str, buffers: Sequence[Buffer]) -> None:
        self.destination = destination
        self._views = []
        self._chunks: deque[Buffer] = deque(tls_chunks(buffers))
        self.size = sum(len(c) for c in self._chunks)
        self.remaining = self.size

    def write_to(self, sock: socket.socket) -> tuple[bool, int]:
        tls = cast(ssl.SSLSocket, sock)
        written = 0
        chunks = self._chunks
        while chunks:
            chunk = chunks[0]
            n = send_some(tls, chunk)
            if n == 0:  # socket full: the same chunk goes again on the next call
                break
            written += n
            self.remaining -= n
            if n < len(chunk):  # only with partial writes enabled: the rest goes next
                chunks[0] = memoryview(chunk)[n:]
            else:
                chunks.popleft()
        return not chunks, written


class ServerChannel:
    """One client connection (Kafka's ``KafkaChannel``).

    ``receive_type`` / ``send_type`` are the plain or TLS classes, chosen at registration;
    a TLS channel starts ``handshaking`` and waits for ``handshake_events`` meanwhile.
    ``sasl`` is the SASL state of a connection that has yet to authenticate, or is
    re-authenticating (None once it has, and on listeners without SASL).
    ``reauth_session`` is the session of an authenticated connection whose session
    expires (``connections.max.reauth.ms``), else None.
    ``held_bytes`` is what its request in flight holds of the memory pool;
    ``memory_muted`` says that reading stopped until the pool has room.
    """

    __slots__ = (
        "events",
        "handshake_events",
        "handshaking",
        "held_bytes",
        "id",
        "last_active_ns",
        "max_receive_size",
        "memory_muted",
        "muted",
        "peer",
        "principal",
        "reauth_session",
        "receive",
        "receive_type",
        "sasl",
        "send",
        "send_type",
        "sock",
        "tls",
    )

    def __init__(
        self,
        channel_id: str,
        sock: socket.socket,
        peer: str,
        now_ns: int,
        max_receive_size: int,
        *,
        sasl: SaslSession | None = None,
    ) -> None:
        self.id = channel_id
        self.sock = sock
        self.peer = peer
        self.muted = False
        self.memory_muted = False
        self.held_bytes = 0
        self.receive: NetworkReceive | None = None
        self.send: NetworkSend | None = None
        self.events = 0
        self.last_active_ns = now_ns
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.handshaking = self.tls
        self.handshake_events = _READ  # a TLS server first waits for the ClientHello
        self.receive_type: type[NetworkReceive] = TlsNetworkReceive if self.tls else NetworkReceive
        self.send_type: type[NetworkSend] = TlsNetworkSend if self.tls else NetworkSend
        self.sasl = sasl
        self.reauth_session: SaslSession | None = None
        #: the user it authenticated as (SASL), else Kafka's ``ANONYMOUS``
        self.principal = "ANONYMOUS"
        self.max_receive_size = (
            max_receive_size if sasl is None else min(max_receive_size, sasl.max_receive_size)
        )


#: Handshake errors that only mean the client went away.
_PEER_GONE = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError)
#: OpenSSL reasons for bytes that are not a TLS ClientHello.
_NOT_TLS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "HTTP_REQUEST",
        "HTTPS_PROXY_REQUEST",
        "PACKET_LENGTH_TOO_LONG",
        "UNSUPPORTED_PROTOCOL",
        "UNKNOWN_PROTOCOL",
        "RECORD_LAYER_FAILURE",
    }
)


def handshake_failure(exc: BaseException) -> str:
    """Why a server-side TLS handshake failed, for the one log line (and which setting,
    on which side, usually fixes it)."""
    if isinstance(exc, _PEER_GONE):
        return "the client closed the connection during the handshake"
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or exc.reason or str(exc)
        return (
            f"the client certificate is not trusted ({detail}); "
            "'ssl.truststore.location' must hold the CA that signed it"
        )
    if not isinstance(exc, ssl.SSLError):
        return str(exc) or type(exc).__name__
    reason = exc.reason or ""
    if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return "the client sent no certificate and 'ssl.client.auth' is required"
    if reason in _NOT_TLS:
        return (
            f"not a TLS client ({reason}): a PLAINTEXT client on this SSL listener? "
            "the client needs security.protocol=SSL"
        )
    if reason.startswith(("TLSV1_ALERT_", "SSLV3_ALERT_")):
        alert = reason.split("_ALERT_", 1)[1].lower().replace("_", " ")
        hint = (
            " (does the client trust the CA that signed 'ssl.keystore.location'?)"
            if alert in ("unknown ca", "bad certificate", "certificate unknown")
            else ""
        )
        return f"the client rejected the handshake (alert: {alert}){hint}"
    if reason == "UNEXPECTED_EOF_WHILE_READING":
        return "the client closed the connection during the handshake"
    return f"{reason or exc}"
