import threading

import pytest

from kclient.errors import BufferExhaustedError, IllegalStateError, RecordTooLargeError
from kclient.sender.buffer_pool import BufferPool
from kclient.testing import MockClock


def _mock_wait(clock: MockClock) -> object:
    """A condition wait that times out at once by moving the mock clock forward."""

    def wait(condition: threading.Condition, timeout_ms: int) -> None:
        clock.advance(timeout_ms)

    return wait


def test_allocate_and_deallocate_account_for_memory() -> None:
    pool = BufferPool(1000, MockClock())
    pool.allocate(400, 0)
    pool.allocate(600, 0)
    assert pool.available_bytes == 0
    pool.deallocate(400)
    assert pool.available_bytes == 400


def test_request_larger_than_buffer_memory_fails_at_once() -> None:
    pool = BufferPool(1000, MockClock())
    with pytest.raises(
        RecordTooLargeError, match=r"1001 bytes is larger than 'buffer.memory' \(1000 bytes\)"
    ):
        pool.allocate(1001, 60_000)


def test_exhausted_pool_blocks_for_max_block_ms_then_fails() -> None:
    clock = MockClock()
    pool = BufferPool(1000, clock, wait=_mock_wait(clock))  # type: ignore[arg-type]
    pool.allocate(1000, 0)
    with pytest.raises(BufferExhaustedError, match=r"within 'max.block.ms' \(250 ms\)"):
        pool.allocate(10, 250)
    assert clock.monotonic_ms() == 250
    assert pool.queued == 0
    assert pool.wait_time_ns_total == 250_000_000


def test_partial_memory_taken_while_waiting_is_returned_on_timeout() -> None:
    clock = MockClock()
    pool = BufferPool(1000, clock, wait=_mock_wait(clock))  # type: ignore[arg-type]
    pool.allocate(900, 0)
    with pytest.raises(BufferExhaustedError):
        pool.allocate(500, 10)
    assert pool.available_bytes == 100


def test_deallocate_wakes_a_blocked_allocation() -> None:
    pool = BufferPool(100, MockClock())
    pool.allocate(100, 0)
    done = threading.Event()

    def blocked() -> None:
        pool.allocate(60, 60_000)
        done.set()

    thread = threading.Thread(target=blocked)
    thread.start()
    _wait_until(lambda: pool.queued == 1)
    assert not done.is_set()
    pool.deallocate(100)
    thread.join(10)
    assert done.is_set()
    assert pool.available_bytes == 40


def test_waiters_are_served_first_come_first_served() -> None:
    pool = BufferPool(100, MockClock())
    pool.allocate(100, 0)
    order: list[str] = []

    def take(name: str, size: int) -> None:
        pool.allocate(size, 60_000)
        order.append(name)

    big = threading.Thread(target=take, args=("big", 80))
    big.start()
    _wait_until(lambda: pool.queued == 1)
    small = threading.Thread(target=take, args=("small", 10))
    small.start()
    _wait_until(lambda: pool.queued == 2)
    pool.deallocate(50)  # enough for the small one, but the big one is first in line
    assert order == []
    pool.deallocate(50)
    big.join(10)
    small.join(10)
    assert order == ["big", "small"]
    assert pool.available_bytes == 10


def test_new_allocations_queue_behind_waiters() -> None:
    pool = BufferPool(100, MockClock())
    pool.allocate(90, 0)

    def take() -> None:
        pool.allocate(50, 60_000)

    waiter = threading.Thread(target=take)
    waiter.start()
    _wait_until(lambda: pool.queued == 1)
    # 10 bytes are free, but a waiter is queued: a newcomer must not jump the line
    with pytest.raises(BufferExhaustedError):
        pool.allocate(5, 0)
    pool.deallocate(90)
    waiter.join(10)
    assert pool.available_bytes == 50


def test_close_wakes_waiters_with_a_clear_error() -> None:
    pool = BufferPool(10, MockClock())
    pool.allocate(10, 0)
    errors: list[BaseException] = []

    def take() -> None:
        try:
            pool.allocate(5, 60_000)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=take)
    thread.start()
    _wait_until(lambda: pool.queued == 1)
    pool.close()
    thread.join(10)
    assert len(errors) == 1
    assert isinstance(errors[0], IllegalStateError)
    assert "closed" in str(errors[0])
    with pytest.raises(IllegalStateError):
        pool.allocate(1, 0)


def test_deallocating_more_than_allocated_is_a_bug() -> None:
    pool = BufferPool(10, MockClock())
    with pytest.raises(IllegalStateError):
        pool.deallocate(1)


def _wait_until(condition: object) -> None:
    event = threading.Event()
    for _ in range(10_000):
        if condition():  # type: ignore[operator]
            return
        event.wait(0.001)
    raise AssertionError("condition never became true")
