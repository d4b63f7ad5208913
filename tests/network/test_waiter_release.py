"""Threads waiting on completed batches wake when the Sender thread is about to block.

The Sender hands the locks of waiting callers to its client (``release_before_blocking``);
``KSelector.poll`` releases them just before ``select``, once its own work is done, so a
woken caller finds the GIL free. No sockets: ``KSelector`` runs over a scripted
``selectors.BaseSelector``.
"""

from __future__ import annotations

import selectors
import threading
from collections.abc import Mapping
from typing import Any

from kclient.network.selector import KSelector
from kclient.testing import MockClock
from tests.sender.sender_helpers import make


class RecordingSelector(selectors.BaseSelector):
    """Records, at each ``select``, which of the watched locks were still held."""

    def __init__(self, watched: list[threading.Lock]) -> None:
        self._keys: dict[Any, selectors.SelectorKey] = {}
        self.watched = watched
        self.held_at_select: list[list[bool]] = []

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.held_at_select.append([gate.locked() for gate in self.watched])
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys


def test_kselector_releases_waiters_just_before_select_and_only_once() -> None:
    gate = threading.Lock()
    gate.acquire()
    recording = RecordingSelector([gate])
    selector = KSelector(MockClock(), selector=recording)
    try:
        selector.release_before_select.append(gate)
        assert gate.locked()  # nothing releases it before the poll
        selector.poll(0)
        assert recording.held_at_select == [[False]]
        assert selector.release_before_select == []
        gate.acquire()  # a waiter took it again: a later poll must not release it twice
        selector.poll(0)
        assert recording.held_at_select[-1] == [True]
    finally:
        selector.close()


def test_a_caller_waiting_on_a_batch_is_released_by_the_senders_next_poll() -> None:
    h = make()
    [future] = h.send("t", 0)
    h.run()  # the ProduceRequest goes out
    result = future.produce_result
    assert not result.wait(0)  # a waiter: it holds the batch's gate and times out
    h.client.respond(
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 7}],
                }
            ]
        }
    )
    h.run()  # this step's poll completes the batch; its waiter's gate is handed over
    gate = result._gate
    assert gate is not None and gate.locked()
    assert h.client.release_before_blocking == [gate]
    h.run()  # the next poll, where a real client blocks, releases it
    assert not gate.locked()
    assert h.client.release_before_blocking == []
    assert future.result(0).offset == 7
