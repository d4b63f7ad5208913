"""LoopSelector: a ``selectors.BaseSelector`` whose readiness comes from an asyncio event
loop (``loop.add_reader``/``add_writer``) instead of a blocking ``select``.

No Kafka counterpart: it lets ``KSelector`` (Kafka's ``Selector``: connects, TLS
handshakes, framing, SASL through the ``NetworkClient``) run unchanged on the event loop.
``KSelector`` registers its sockets here as it would with ``DefaultSelector``; the loop
calls back when one is ready, ``on_ready`` runs the ``Sender`` step at once, and that
step's ``select`` returns what became ready since the last one without waiting. The
timeout ``select`` was asked for is kept in ``requested_timeout_ms`` (when the next step is
due if no I/O comes: see ``loop_sender``), and whether it returned anything in
``returned_events`` (then the next step is due at once, as a thread's ``poll`` returns
early and its loop goes round).

Owned by the event loop's thread, like everything in ``kclient.aio``.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Mapping
from typing import Any

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


def _fd(fileobj: Any) -> int:
    fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
    if not isinstance(fd, int) or fd < 0:
        raise ValueError(f"invalid file object {fileobj!r}")
    return fd


class LoopSelector(selectors.BaseSelector):
    """``select`` never blocks: it returns the readiness the loop reported since the last
    call (level-triggered, as epoll: a socket still readable is reported again)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_ready: Callable[[], None]) -> None:
        self._loop = loop
        self._on_ready = on_ready
        self._keys: dict[int, selectors.SelectorKey] = {}
        self._ready: dict[int, int] = {}
        self.requested_timeout_ms = 0
        self.returned_events = False

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = _fd(fileobj)
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} (fd {fd}) is already registered")
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        self._watch(fd, 0, events)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = _fd(fileobj)
        key = self._keys.pop(fd)
        self._watch(fd, key.events, 0)
        self._ready.pop(fd, None)
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = _fd(fileobj)
        old = self._keys[fd]
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        self._watch(fd, old.events, events)
        ready = self._ready.get(fd)
        if ready is not None and not ready & events:
            del self._ready[fd]
        return key

    def _watch(self, fd: int, old: int, new: int) -> None:
        loop = self._loop
        if new & _READ and not old & _READ:
            loop.add_reader(fd, self._readable, fd)
        elif old & _READ and not new & _READ:
            loop.remove_reader(fd)
        if new & _WRITE and not old & _WRITE:
            loop.add_writer(fd, self._writable, fd)
        elif old & _WRITE and not new & _WRITE:
            loop.remove_writer(fd)

    def _readable(self, fd: int) -> None:
        self._ready[fd] = self._ready.get(fd, 0) | _READ
        self._on_ready()

    def _writable(self, fd: int) -> None:
        self._ready[fd] = self._ready.get(fd, 0) | _WRITE
        self._on_ready()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.requested_timeout_ms = 3_600_000 if timeout is None else int(timeout * 1000)
        if not self._ready:
            self.returned_events = False
            return []
        self.returned_events = True
        keys = self._keys
        ready = [(keys[fd], mask & keys[fd].events) for fd, mask in self._ready.items()]
        self._ready.clear()
        return ready

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return {key.fileobj: key for key in self._keys.values()}

    def close(self) -> None:
        for fd, key in list(self._keys.items()):
            if not self._loop.is_closed():
                self._watch(fd, key.events, 0)
        self._keys.clear()
        self._ready.clear()
