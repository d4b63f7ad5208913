import queue
import threading
from collections.abc import Callable

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
    waits = DrivenWait()
    pool = BufferPool(100, MockClock(), wait=waits)
    pool.allocate(100, 0)
    done = threading.Event()

    def blocked() -> None:
        pool.allocate(60, 60_000)
        done.set()

    thread = _start("blocked", blocked)
    assert waits.next_blocked() == "blocked"
    assert pool.queued == 1
    assert not done.is_set()
    pool.deallocate(100)
    _join(thread)
    assert done.is_set()
    assert pool.available_bytes == 40
    assert pool.queued == 0


def test_waiters_are_served_first_come_first_served() -> None:
    waits = DrivenWait()
    pool = BufferPool(100, MockClock(), wait=waits)
    pool.allocate(100, 0)
    big = _start("big", lambda: pool.allocate(80, 60_000))
    assert waits.next_blocked() == "big"
    small = _start("small", lambda: pool.allocate(10, 60_000))
    assert waits.next_blocked() == "small"
    pool.deallocate(50)  # enough for the small one, but the big one is first in line
    assert waits.next_blocked() == "big"  # took the 50 bytes, waits for 30 more
    assert pool.queued == 2  # the small one is still waiting
    assert pool.available_bytes == 0
    pool.deallocate(50)  # the big one completes, then hands the rest on to the small one
    _join(big, small)
    assert pool.queued == 0
    assert pool.available_bytes == 10


def test_new_allocations_queue_behind_waiters() -> None:
    waits = DrivenWait()
    pool = BufferPool(100, MockClock(), wait=waits)
    pool.allocate(90, 0)
    waiter = _start("waiter", lambda: pool.allocate(50, 60_000))
    assert waits.next_blocked() == "waiter"  # holding the 10 free bytes, waiting for 40
    waits.hold_woken = True
    pool.deallocate(90)
    assert waits.next_woken() == "waiter"  # notified, but has not taken its 40 bytes yet
    assert pool.available_bytes == 90
    # 90 bytes are free, but a waiter is queued: a newcomer must not jump the line
    with pytest.raises(BufferExhaustedError):
        pool.allocate(5, 0)
    assert not pool.try_allocate(5)  # nor without waiting (send's new batch, in C)
    waits.resume_woken.set()
    _join(waiter)
    assert pool.available_bytes == 50


def test_close_wakes_waiters_with_a_clear_error() -> None:
    waits = DrivenWait()
    pool = BufferPool(10, MockClock(), wait=waits)
    pool.allocate(10, 0)
    errors: list[BaseException] = []

    def take() -> None:
        try:
            pool.allocate(5, 60_000)
        except BaseException as exc:
            errors.append(exc)

    thread = _start("waiter", take)
    assert waits.next_blocked() == "waiter"
    pool.close()
    _join(thread)
    assert len(errors) == 1
    assert isinstance(errors[0], IllegalStateError)
    assert "closed" in str(errors[0])
    with pytest.raises(IllegalStateError):
        pool.allocate(1, 0)


def test_try_allocate_takes_free_memory_or_nothing() -> None:
    pool = BufferPool(100, MockClock())
    assert pool.try_allocate(60)
    assert not pool.try_allocate(41)  # 40 free: nothing taken
    assert pool.available_bytes == 40
    assert not pool.try_allocate(101)  # larger than buffer.memory: allocate says why
    assert pool.try_allocate(40)
    assert pool.available_bytes == 0
    pool.deallocate(100)
    pool.close()
    assert not pool.try_allocate(1)  # closed: allocate says so


def test_deallocating_more_than_allocated_is_a_bug() -> None:
    pool = BufferPool(10, MockClock())
    with pytest.raises(IllegalStateError):
        pool.deallocate(1)


class DrivenWait:
    """The pool's condition wait, driven by the test instead of by time.

    A caller blocks until it is notified (time stands still: no timeout), and reports when
    it blocks and when it wakes, so the test knows where each thread is without sleeping.
    A report of "blocked" is made while the thread still holds the pool's lock, so nothing
    the test does to the pool afterwards can happen before the thread really waits.
    With ``hold_woken`` set, a woken caller gives the lock back and stays put until
    ``resume_woken`` is set: a thread that was notified but has not run yet.
    """

    def __init__(self) -> None:
        self._blocked: queue.Queue[str] = queue.Queue()
        self._woken: queue.Queue[str] = queue.Queue()
        self.hold_woken = False
        self.resume_woken = threading.Event()

    def __call__(self, condition: threading.Condition, timeout_ms: int) -> None:
        name = threading.current_thread().name
        self._blocked.put(name)
        condition.wait()
        self._woken.put(name)
        if self.hold_woken:
            condition.release()
            self.resume_woken.wait()
            condition.acquire()

    def next_blocked(self) -> str:
        """The name of the next thread to block (a bounded wait: a safety net only)."""
        return _next(self._blocked, "no thread blocked")

    def next_woken(self) -> str:
        return _next(self._woken, "no blocked thread was woken")


def _next(reports: queue.Queue[str], failure: str) -> str:
    try:
        return reports.get(timeout=10)
    except queue.Empty:
        raise AssertionError(failure) from None


def _start(name: str, target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive(), f"{thread.name} is still blocked"
