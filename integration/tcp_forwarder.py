"""A TCP forwarder on 127.0.0.1 for integration tests: what a load balancer or a stalled
network between a client and a broker is. One thread, which ``close`` stops."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from types import TracebackType

LOOPBACK = "127.0.0.1"


class TcpForwarder:
    """Accepts on ``port`` (0: a free one, then in ``self.port``) and forwards each
    connection to ``127.0.0.1:target``, read when the connection is accepted: set
    ``target`` to send new connections elsewhere (a cluster replaced behind a load
    balancer). While ``paused`` is set the client-to-broker bytes wait in the forwarder
    (a stalled network); ``resume`` lets them go. A connection whose target is down is
    closed."""

    def __init__(self, target: int, port: int = 0) -> None:
        self.target = target
        self._listener = socket.create_server((LOOPBACK, port))
        self._listener.setblocking(False)
        self.port = int(self._listener.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._peer: dict[socket.socket, socket.socket] = {}
        self._held: dict[socket.socket, bytearray] = {}  # client socket -> bytes held
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp-forwarder", daemon=True)
        self._thread.start()

    def __enter__(self) -> TcpForwarder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def resume(self) -> None:
        self.paused.clear()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                else:
                    self._forward(sock)
            if not self.paused.is_set():
                for sock, held in self._held.items():
                    if held and sock in self._peer:
                        self._send(self._peer[sock], bytes(held))
                        held.clear()

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        try:
            upstream = socket.create_connection((LOOPBACK, self.target), timeout=5)
        except OSError:
            client.close()  # the target is down: the client sees its connection closed
            return
        self._peer[client], self._peer[upstream] = upstream, client
        self._held[client] = bytearray()
        for sock in (client, upstream):
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        peer = self._peer.get(sock)
        if not data or peer is None:
            self._drop(sock)
        elif sock in self._held and self.paused.is_set():
            self._held[sock] += data
        elif not self._send(peer, data):
            self._drop(sock)

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> bool:
        try:
            sock.setblocking(True)
            sock.sendall(data)
            sock.setblocking(False)
        except OSError:
            return False
        return True

    def _drop(self, sock: socket.socket) -> None:
        for end in (sock, self._peer.pop(sock, None)):
            if end is None:
                continue
            self._peer.pop(end, None)
            self._held.pop(end, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(end)
            end.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in list(self._peer):
            self._drop(sock)
        self._selector.close()
        self._listener.close()
