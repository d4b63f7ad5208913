"""The transaction coordinator's locking: one lock per transactional id (as Kafka's
per-``TransactionMetadata`` lock), so the requests of different ids run at once and those
of one id one at a time, and an expired id leaves no lock behind. Threads with events and
bounded waits; no sockets."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kclient.broker.txn_metadata import TransactionState
from tests.broker.conftest import NOW_MS
from tests.broker.txn_harness import fetch, txn_batch, values

NONE = 0
WAIT_S = 10.0  # bound on every wait for something that must happen


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, threading.Event, list[Any]]:
    done = threading.Event()
    out: list[Any] = []

    def run() -> None:
        out.append(call())
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done, out


def _hold(state: Any, transactional_id: str) -> tuple[threading.Event, threading.Thread]:
    """Hold ``transactional_id``'s lock on another thread until the event is set."""
    held, release = threading.Event(), threading.Event()

    def run() -> None:
        with state.locked(transactional_id):
            held.set()
            release.wait(WAIT_S)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert held.wait(WAIT_S)
    return release, thread


def test_requests_of_other_ids_do_not_wait_for_one_that_is_busy(harness: Any) -> None:
    coordinator = harness.apis[0].txn_coordinator
    release, holder = _hold(coordinator.state, "busy")
    try:
        thread, done, out = _in_thread(lambda: coordinator.handle_init_producer_id("other", 60_000))
        assert done.wait(WAIT_S), "InitProducerId of another id waited for the busy one"
        assert out[0].error == NONE
        # the busy id's own request waits for its lock, and goes on once it is free
        thread, done, out = _in_thread(lambda: coordinator.handle_init_producer_id("busy", 60_000))
        assert not done.wait(0.2)
    finally:
        release.set()
        holder.join(WAIT_S)
    assert done.wait(WAIT_S) and out[0].error == NONE
    thread.join(WAIT_S)


def test_an_expired_id_leaves_no_lock_and_a_waiting_request_starts_it_again(
    harness: Any,
) -> None:
    coordinator = harness.apis[0].txn_coordinator
    state = coordinator.state
    first = coordinator.handle_init_producer_id("x", 60_000)
    release, holder = _hold(state, "x")
    thread, done, out = _in_thread(lambda: coordinator.handle_init_producer_id("x", 60_000))
    # the expiry (timer thread) and the request both wait for the id's lock; either may
    # get it first, and neither may be stuck on a lock the expiry threw away
    expired: list[int] = []
    expirer = threading.Thread(
        target=lambda: expired.append(coordinator.expire_transactional_ids(NOW_MS + 10**12, 1)),
        daemon=True,
    )
    expirer.start()
    release.set()
    holder.join(WAIT_S)
    expirer.join(WAIT_S)
    assert done.wait(WAIT_S) and not expirer.is_alive()
    thread.join(WAIT_S)
    again = out[0]
    assert again.error == NONE and expired == [1]
    if state.get("x") is None:  # the request went first, then the id expired
        assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
        assert "x" not in state._id_locks  # no lock kept for an id that is gone
    else:  # the id expired first: it started over with a new producer id
        assert again.producer_id != first.producer_id and again.producer_epoch == 0


def test_transactions_of_many_ids_in_parallel_all_commit(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    apis = harness.apis[0]
    coordinator, replicas = apis.txn_coordinator, apis.replica_manager
    topic = harness.controller.topic("t")
    producers, transactions = 6, 15
    failures: list[str] = []

    def produce_and_commit(n: int) -> None:
        transactional_id = f"p{n}"
        init = coordinator.handle_init_producer_id(transactional_id, 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        for t in range(transactions):
            batch = txn_batch([b"%d-%d" % (n, t)], pid, epoch, 0)
            appended = replicas.append(
                topic, 0, bytearray(batch), produce_version=12, now_ms=NOW_MS,
                transactional_id=transactional_id,
            )  # fmt: skip
            ended = coordinator.handle_end_txn(transactional_id, pid, epoch, True, 2)
            if appended.error_code or ended.error:
                failures.append(f"{n}/{t}: {appended.error_code} {ended.error}")
                return
            pid, epoch = ended.producer_id, ended.producer_epoch

    threads = [
        threading.Thread(target=produce_and_commit, args=(n,), daemon=True)
        for n in range(producers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 3)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    states = {m.transactional_id: m for m in coordinator.state.transactions()}
    assert all(
        m.state is TransactionState.COMPLETE_COMMIT and m.producer_epoch == transactions
        for m in states.values()
    )
    seen = values(fetch(harness, "t", read_committed=True))
    expected = {b"%d-%d" % (n, t) for n in range(producers) for t in range(transactions)}
    assert len(seen) == len(expected) and set(seen) == expected
