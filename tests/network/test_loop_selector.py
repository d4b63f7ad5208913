"""kclient.aio's LoopSelector: ``select`` and the reader callback over a fake event loop that
records what it is asked to watch. No sockets, no loop."""

from __future__ import annotations

import selectors
from collections.abc import Callable
from typing import Any

from kclient.aio import loop_selector

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


class FakeLoop:
    """Records add/remove of readers and writers; ``fire`` calls a watched callback."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []
        self.readers: dict[int, tuple[Callable[..., None], tuple[Any, ...]]] = {}
        self.writers: dict[int, tuple[Callable[..., None], tuple[Any, ...]]] = {}

    def add_reader(self, fd: int, callback: Callable[..., None], *args: Any) -> None:
        self.log.append(("add_reader", fd))
        self.readers[fd] = (callback, args)

    def remove_reader(self, fd: int) -> bool:
        self.log.append(("remove_reader", fd))
        return self.readers.pop(fd, None) is not None

    def add_writer(self, fd: int, callback: Callable[..., None], *args: Any) -> None:
        self.log.append(("add_writer", fd))
        self.writers[fd] = (callback, args)

    def remove_writer(self, fd: int) -> bool:
        self.log.append(("remove_writer", fd))
        return self.writers.pop(fd, None) is not None

    def is_closed(self) -> bool:
        return False

    def fire(self, kind: str, fd: int) -> None:
        callback, args = (self.readers if kind == "r" else self.writers)[fd]
        callback(*args)


def run(cls: type, script: list[tuple[Any, ...]]) -> list[Any]:
    loop = FakeLoop()
    woken: list[int] = []
    sel = cls(loop, lambda: woken.append(len(woken)))
    seen: list[Any] = []
    for step in script:
        op, *args = step
        try:
            if op == "select":
                events = sel.select(*args[:1], **args[1] if len(args) > 1 else {})
                result: Any = [(k.fd, k.events, k.data, mask) for k, mask in events]
                result.append((sel.requested_timeout_ms, sel.returned_events))
            elif op in ("r", "w"):
                loop.fire(op, args[0])
                result = dict(sel._ready)
            elif op == "register":
                result = sel.register(args[0], args[1], f"data{args[0]}").events
            elif op == "modify":
                result = sel.modify(args[0], args[1], f"data{args[0]}").events
            else:
                result = sel.unregister(args[0]).fd
        except Exception as exc:
            result = (type(exc).__name__, str(exc))
        seen.append((result, list(woken), list(loop.log)))
    return seen


SCRIPTS = {
    "several": [
        ("register", 5, READ),
        ("register", 6, READ | WRITE),
        ("register", 7, READ),
        ("w", 6),
        ("r", 7),
        ("r", 6),
        ("r", 6),
        ("select", 0),
        ("select", 0.0015),
        ("r", 5),
        ("select", None, {}),
        ("select", None, {"timeout": 2}),
    ],
}


def test_what_select_returns() -> None:
    seen = run(loop_selector.LoopSelector, SCRIPTS["several"])
    assert seen[5][0] == {6: READ | WRITE, 7: READ}  # the reader callback marks its fd
    assert seen[7][0] == [
        (6, READ | WRITE, "data6", READ | WRITE),
        (7, READ, "data7", READ),
        (0, True),
    ]
    assert seen[7][1] == [0, 1, 2, 3]  # each callback ran the step (on_ready)
    assert seen[8][0] == [(1, False)]  # nothing since: a timeout of int(1.5 ms)
    assert seen[10][0] == [(5, READ, "data5", READ), (3_600_000, True)]
