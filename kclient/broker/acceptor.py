"""Acceptor: the listener thread of the embedded broker (Kafka's ``SocketServer.Acceptor``).

Its own thread accepts connections on the listener and hands each one, round-robin, to a
Processor through that Processor's bounded new-connection queue (blocking only when every
Processor's queue is full). Accept errors (e.g. EMFILE) are logged and retried after a
short pause; the thread never dies of them.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections.abc import Sequence

from kclient.broker.processor import Processor

log = logging.getLogger(__name__)


class Acceptor:
    """The listener thread: accept, then hand the connection to a Processor round-robin."""

    def __init__(
        self,
        host: str,
        port: int,
        processors: Sequence[Processor],
        *,
        backlog: int = 512,
        name_prefix: str = "kclient-broker",
    ) -> None:
        self.processors = list(processors)
        self._server = socket.create_server((host, port), backlog=backlog, reuse_port=False)
        self._server.setblocking(False)
        self.host = host
        self.port = int(self._server.getsockname()[1])
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._server, selectors.EVENT_READ, "accept")
        self._sel.register(self._wakeup_r, selectors.EVENT_READ, "wakeup")
        self._running = True
        self._next = 0
        self._thread = threading.Thread(
            target=self.run, name=f"{name_prefix}-acceptor-{self.port}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def run(self) -> None:
        try:
            while self._running:
                for key, _ in self._sel.select(0.5):
                    if key.data == "wakeup" or not self._running:
                        continue
                    self._accept_ready()
        except Exception:
            log.exception("acceptor on port %d failed", self.port)
        finally:
            self._close()

    def _accept_ready(self) -> None:
        for _ in range(64):
            try:
                sock, _addr = self._server.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # e.g. EMFILE: back off briefly, keep serving
                log.warning("accept failed on port %d: %s", self.port, exc)
                time.sleep(0.05)
                return
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                sock.close()
                continue
            self._assign(sock)

    def _assign(self, sock: socket.socket) -> None:
        retries_left = len(self.processors)
        while self._running:
            retries_left -= 1
            processor = self.processors[self._next % len(self.processors)]
            self._next += 1
            if processor.accept(sock, may_block=retries_left <= 0):
                return
            if retries_left <= 0:
                retries_left = len(self.processors)
        sock.close()

    def initiate_shutdown(self) -> None:
        self._running = False
        with contextlib.suppress(OSError):
            self._wakeup_w.send(b"\0")

    def await_shutdown(self, timeout_s: float = 5.0) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        else:
            self._close()

    def _close(self) -> None:
        with contextlib.suppress(Exception):
            self._sel.close()
        for s in (self._server, self._wakeup_r, self._wakeup_w):
            with contextlib.suppress(OSError):
                s.close()
