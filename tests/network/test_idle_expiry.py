"""IdleExpiryManager, the bookkeeping behind ``connections.max.idle.ms``, with no sockets.

KSelector records every connect, read and write with ``update`` and closes what
``poll_expired`` names (one per poll), then ``remove``s it. Time comes from a MockClock.
"""

from __future__ import annotations

import pytest

from kclient.network.selector import IdleExpiryManager
from kclient.testing import MockClock

MAX_IDLE_MS = 1000


@pytest.fixture
def clock() -> MockClock:
    return MockClock()


@pytest.fixture
def manager() -> IdleExpiryManager:
    return IdleExpiryManager(MAX_IDLE_MS)


def test_a_connection_expires_only_after_more_than_max_idle_ms(
    clock: MockClock, manager: IdleExpiryManager
) -> None:
    clock.advance(5)
    used_at = clock.monotonic_ms()
    manager.update(1, used_at)
    clock.advance(MAX_IDLE_MS)
    assert manager.poll_expired(clock.monotonic_ms()) is None  # idle exactly max_idle: kept
    clock.advance(1)
    assert manager.poll_expired(clock.monotonic_ms()) == 1


def test_an_expired_connection_is_named_until_removed_then_forgotten(
    manager: IdleExpiryManager,
) -> None:
    manager.update(1, 0)
    assert manager.poll_expired(MAX_IDLE_MS + 1) == 1
    assert manager.poll_expired(MAX_IDLE_MS + 2) == 1  # still there: the caller closes it
    manager.remove(1)
    assert manager.poll_expired(MAX_IDLE_MS + 3) is None
    assert manager.poll_expired(10 * MAX_IDLE_MS) is None


def test_a_later_use_refreshes_a_connection(clock: MockClock, manager: IdleExpiryManager) -> None:
    manager.update(1, clock.monotonic_ms())
    clock.advance(MAX_IDLE_MS)
    assert manager.poll_expired(clock.monotonic_ms()) is None
    manager.update(1, clock.monotonic_ms())  # used again at t=max_idle
    clock.advance(1)
    assert manager.poll_expired(clock.monotonic_ms()) is None  # would have expired here
    clock.advance(MAX_IDLE_MS - 1)
    assert manager.poll_expired(clock.monotonic_ms()) is None
    clock.advance(1)
    assert manager.poll_expired(clock.monotonic_ms()) == 1


def test_the_least_recently_used_connection_is_named_first(manager: IdleExpiryManager) -> None:
    manager.update(1, 0)
    manager.update(2, 100)
    manager.update(3, 200)
    manager.update(1, 300)  # node 1 used again: node 2 is now the oldest, then 3, then 1
    named = []
    for now_ms in (2000, 2001, 2002):
        node = manager.poll_expired(now_ms)
        assert node is not None
        named.append(node)
        manager.remove(node)
    assert named == [2, 3, 1]
    assert manager.poll_expired(3000) is None


def test_only_the_oldest_is_named_while_younger_ones_are_still_within_the_limit(
    manager: IdleExpiryManager,
) -> None:
    manager.update(1, 0)
    manager.update(2, 500)
    assert manager.poll_expired(1001) == 1
    manager.remove(1)
    assert manager.poll_expired(1001) is None  # node 2 idle 501 ms
    assert manager.poll_expired(1500) is None
    assert manager.poll_expired(1501) == 2


def test_removing_a_connection_before_it_expires_forgets_it(
    manager: IdleExpiryManager,
) -> None:
    manager.update(1, 0)
    manager.update(2, 600)
    manager.remove(1)
    assert manager.poll_expired(1001) is None  # node 1 would have expired; node 2 has not
    assert manager.poll_expired(1601) == 2


def test_a_connection_added_after_an_empty_check_still_expires_on_time(
    manager: IdleExpiryManager,
) -> None:
    assert manager.poll_expired(0) is None  # nothing to watch
    manager.update(1, 10)
    assert manager.poll_expired(1010) is None
    assert manager.poll_expired(1011) == 1


def test_a_negative_limit_never_expires_anything() -> None:
    manager = IdleExpiryManager(-1)
    manager.update(1, 0)
    assert manager.poll_expired(10**12) is None
