"""Fixtures shared by the unit tests of ``KafkaProducer``'s caller side: a producer
(linger 0) over ``LiveMockClient``, which answers like a broker (no sockets). And a check
after every test: it left no kclient thread running."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator

import pytest

from kclient.producer import KafkaProducer
from tests.test_producer import LiveMockClient


@pytest.fixture
def client() -> LiveMockClient:
    return LiveMockClient()


@pytest.fixture
def producer(client: LiveMockClient) -> Iterator[KafkaProducer]:
    with KafkaProducer(bootstrap_servers="127.0.0.1:9092", linger_ms=0, kafka_client=client) as p:
        yield p


#: how long a kclient thread a test stopped (close, a dropped producer) may take to end
THREAD_END_S = 10.0
_THREADS_BEFORE = pytest.StashKey[frozenset[int | None]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """A test (and its fixtures) must stop the kclient threads it started: a producer over
    a mock client whose clock never moves, left running, spins for the rest of the run
    (one did: every test after it waited for the GIL, and a unit run took twice its CPU)."""
    before = item.stash.get(_THREADS_BEFORE, frozenset())
    yield
    left = [
        thread
        for thread in threading.enumerate()
        if thread.name.startswith("kclient") and thread.ident not in before
    ]
    for thread in left:
        thread.join(THREAD_END_S)
    running = [thread.name for thread in left if thread.is_alive()]
    assert not running, f"{item.nodeid} left these threads running: {running}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_THREADS_BEFORE] = frozenset(thread.ident for thread in threading.enumerate())
