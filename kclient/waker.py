"""Wake a thread blocked in ``select`` from any other thread.

Used by the client's ``KSelector`` and by the embedded broker's Processors.
"""

from __future__ import annotations

import os
import socket
import threading

__all__ = ["Waker"]


class Waker:
    """Wakes a thread blocked in select from any thread: an eventfd where the OS has one
    (cheaper than a socket), else a socket pair. ``wake`` after ``close`` does nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._eventfd = -1
        self._pair: tuple[socket.socket, socket.socket] | None = None
        if hasattr(os, "eventfd"):
            self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        else:
            reader, writer = socket.socketpair()
            reader.setblocking(False)
            writer.setblocking(False)
            self._pair = (reader, writer)

    def fileno(self) -> int:
        return self._eventfd if self._pair is None else self._pair[0].fileno()

    def wake(self) -> None:
        try:
            if self._pair is not None:
                self._pair[1].send(b"\x00")
                return
            with self._lock:  # a closed eventfd's number may already belong to another file
                if self._eventfd >= 0:
                    os.eventfd_write(self._eventfd, 1)
        except OSError:
            pass  # a wakeup is already pending (buffer full), or closed

    def drain(self) -> None:
        try:
            if self._pair is None:
                os.eventfd_read(self._eventfd)  # one read resets the counter
                return
            while len(self._pair[0].recv(1024)) == 1024:  # one read, unless it came back full
                pass
        except OSError:
            pass

    def close(self) -> None:
        with self._lock:
            if self._pair is not None:
                for sock in self._pair:
                    sock.close()
            elif self._eventfd >= 0:
                os.close(self._eventfd)
                self._eventfd = -1
