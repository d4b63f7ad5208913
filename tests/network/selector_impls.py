"""KSelector driven by scripted sockets and a scripted readiness source: no sockets, no
sleeps (the waker's eventfd is the only file).

``snapshot`` is what a caller can see after a step (the result lists, the errors and their
messages, the interest asked of the selector, the select timeouts, the bytes written) plus
the state the next poll depends on."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Callable, Mapping
from typing import Any

from kclient.network.channel import NetworkSend
from kclient.network.selector import KSelector
from kclient.testing import MockClock
from tests.network.channel_impls import FakeSocket

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


class Sock(FakeSocket):
    """A scripted socket KSelector can adopt (``register``) and close; ``getsockopt`` answers
    a connect's SO_ERROR with ``connect_error``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closed = False
        self.connect_error = 0

    def setblocking(self, flag: bool) -> None:
        assert flag is False

    def close(self) -> None:
        self.closed = True

    def getsockopt(self, level: int, option: int) -> int:
        assert (level, option) == (socket.SOL_SOCKET, socket.SO_ERROR)
        return self.connect_error


class ScriptedSelector(selectors.BaseSelector):
    """Readiness from a script: ``ready`` queues (node id or "waker", mask) pairs that the
    next ``select`` returns as (key, mask), in order. Logs every (un)register/modify and
    every select timeout."""

    def __init__(self) -> None:
        self._keys: dict[Any, selectors.SelectorKey] = {}
        self.log: list[tuple[Any, ...]] = []
        self.script: list[list[tuple[int | str, int]]] = []

    def ready(self, *events: tuple[int | str, int]) -> None:
        self.script.append(list(events))

    def _name(self, fileobj: Any) -> Any:
        key = self._keys.get(fileobj)
        if key is not None and key.data is not None:
            return key.data.node_id
        return "waker" if isinstance(fileobj, int) else fileobj

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        assert fileobj not in self._keys
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self._keys[fileobj] = key
        self.log.append(("register", self._name(fileobj), events))
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        self.log.append(("unregister", self._name(fileobj)))
        return self._keys.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self.log.append(("modify", self._name(fileobj), events))
        key = self._keys[fileobj] = selectors.SelectorKey(fileobj, 0, events, data)
        return key

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.log.append(("select", timeout, type(timeout).__name__))
        if not self.script:
            return []
        events = []
        for name, mask in self.script.pop(0):
            events.extend((key, mask) for key in self._keys.values() if self._is(key, name))
        return events

    @staticmethod
    def _is(key: selectors.SelectorKey, name: int | str) -> bool:
        if key.data is None:
            return name == "waker"
        return bool(key.data.node_id == name)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys


class Harness:
    """A KSelector over scripted sockets, with a mock clock."""

    def __init__(self, max_idle_ms: int = 60_000, max_receive: int = 1 << 20) -> None:
        self.clock = MockClock()
        self.readiness = ScriptedSelector()
        self.sel = KSelector(
            self.clock,
            connections_max_idle_ms=max_idle_ms,
            max_receive_bytes=max_receive,
            selector=self.readiness,
        )
        self.socks: dict[int, Sock] = {}

    def add(self, node_id: int, sock: Sock | None = None, chunk_bytes: int | None = None) -> Sock:
        sock = sock or Sock()
        self.socks[node_id] = sock
        self.sel.register(node_id, sock, f"10.0.0.{node_id}:9092")
        if chunk_bytes is not None:  # a smaller read chunk: its edges are reached sooner
            ch = self.sel.channel(node_id)
            ch._chunk = bytearray(chunk_bytes)
            ch._chunk_view = memoryview(ch._chunk)
        return sock

    def send(self, node_id: int, payload: bytes, awaits_response: bool = True) -> None:
        self.sel.send(NetworkSend(node_id, [payload], awaits_response=awaits_response))

    def close(self) -> None:
        self.sel.close()


def snapshot(h: Harness) -> dict[str, Any]:
    sel = h.sel
    channels = {}
    for node_id, ch in sel._channels.items():
        big = ch.receive
        channels[node_id] = (
            ch.events,
            ch.connected,
            ch.muted,
            None if ch.send is None else ch.send.remaining,
            None if big is None else (big.filled, big.size, bytes(big.payload[: big.filled])),
            bytes(ch._chunk[: ch._chunk_len]),
        )
    return {
        "completed_sends": [(s.destination, s.size) for s in sel.completed_sends],
        "completed_receives": [(r.source, bytes(r.payload)) for r in sel.completed_receives],
        "connected": list(sel.connected),
        "disconnected": {n: (type(e).__name__, str(e)) for n, e in sel.disconnected.items()},
        "channels": channels,
        "sending": sorted(sel._sending),
        "early": (
            [(s.destination, s.size) for s in sel._early_sends],
            {n: (type(e).__name__, str(e)) for n, e in sel._early_failures.items()},
        ),
        "idle": list(sel._idle._last_active_ms.items()),
        "idle_next_check": sel._idle._next_check_ms,
        "readiness_log": list(h.readiness.log),
        "written": {n: bytes(s.written) for n, s in h.socks.items()},
        "closed": {n: s.closed for n, s in h.socks.items()},
    }


def run(scenario: Callable[[Harness], list[Any]], **kwargs: Any) -> list[Any]:
    """The scenario's observations (each step's snapshot or raised error is observed by the
    scenario itself)."""
    h = Harness(**kwargs)
    try:
        return scenario(h)
    finally:
        h.close()


def outcome(call: Callable[[], object]) -> tuple[str, str]:
    """What a call did: ("ok", repr of its result) or (error type, message)."""
    try:
        return ("ok", repr(call()))
    except Exception as exc:
        return (type(exc).__name__, str(exc))
