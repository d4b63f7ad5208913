import threading

import pytest

from kclient.errors import BufferExhaustedError, IllegalStateError
from kclient.network.cluster import TopicPartition
from kclient.record import RecordBatch
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.buffer_pool import BufferPool
from kclient.sender.topic_queues import TopicQueues
from kclient.testing import MockClock
from tests.sender.helpers import NODE0, NODE1, accumulator, cluster

VALUE = bytes(100)


def _setup(
    clock: MockClock, leaders: dict, **kwargs: object
) -> tuple[RecordAccumulator, dict[str, TopicQueues]]:
    acc = accumulator(clock, **kwargs)  # type: ignore[arg-type]
    queues = {topic: acc.topic_queues(topic) for topic in leaders}
    acc.update_cluster(cluster(leaders))
    return acc, queues


def _send(
    acc: RecordAccumulator, queues: TopicQueues, partition: int, n: int = 1, value: bytes = VALUE
) -> list:
    return [
        acc.append(queues, partition, 1_000, None, value, None, None, 0, 82 + len(value))
        for _ in range(n)
    ]


def test_batch_is_ready_only_after_linger() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=10)
    _send(acc, q["t"], 0)
    result = acc.ready(cluster(leaders), clock.monotonic_ms())
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == 10
    clock.advance(9)
    assert acc.ready(cluster(leaders), clock.monotonic_ms()).next_ready_check_delay_ms == 1
    clock.advance(1)
    assert acc.ready(cluster(leaders), clock.monotonic_ms()).ready_nodes == {NODE0}


def test_full_batch_is_ready_before_linger() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=1000, batch_size=1024)
    _send(acc, q["t"], 0, n=8)
    assert acc.ready(cluster(leaders), 0).ready_nodes == set()
    _send(acc, q["t"], 0, n=4)  # overflows into a second batch
    assert acc.ready(cluster(leaders), 0).ready_nodes == {NODE0}
    drained = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)
    (first,) = drained[0]
    assert first.record_count == 8
    assert RecordBatch(first.records).record_count == 8  # type: ignore[arg-type]


def test_unknown_leader_is_reported_for_a_metadata_refresh() -> None:
    clock = MockClock()
    acc, q = _setup(clock, {"t": [None, NODE1]}, linger_ms=0)
    _send(acc, q["t"], 0)
    _send(acc, q["t"], 1)
    result = acc.ready(cluster({"t": [None, NODE1]}), 0)
    assert result.unknown_leader_topics == {"t"}
    assert result.ready_nodes == {NODE1}


def test_drain_makes_one_list_per_node_with_one_batch_per_partition() -> None:
    clock = MockClock()
    leaders = {"a": [NODE0, NODE1], "b": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0)
    for topic, partition in (("a", 0), ("a", 1), ("b", 0)):
        _send(acc, q[topic], partition)
    ready = acc.ready(cluster(leaders), 0)
    drained = acc.drain(cluster(leaders), sorted(ready.ready_nodes, key=lambda n: n.id), 1 << 20, 0)
    assert {node: sorted(b.tp for b in batches) for node, batches in drained.items()} == {
        0: [TopicPartition("a", 0), TopicPartition("b", 0)],
        1: [TopicPartition("a", 1)],
    }
    assert not acc.has_undrained()


def test_drain_respects_max_request_size_but_always_sends_one_batch() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0, NODE0, NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0)
    for partition in range(3):
        _send(acc, q["t"], partition, n=5)
    drained = acc.drain(cluster(leaders), [NODE0], 1, 0)  # smaller than any batch
    assert len(drained[0]) == 1
    drained = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)
    assert len(drained[0]) == 2


def test_drain_rotates_fairly_over_partitions() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0] * 4}
    acc, q = _setup(clock, leaders, linger_ms=0)
    for partition in range(4):
        _send(acc, q["t"], partition, n=40)  # several batches per partition
    order = []
    for _ in range(8):
        (batch,) = acc.drain(cluster(leaders), [NODE0], 1, 0)[0]
        order.append(batch.tp.partition)
    assert order == [0, 1, 2, 3, 0, 1, 2, 3]


def test_retried_batch_waits_for_its_backoff_and_goes_first() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=100)
    _send(acc, q["t"], 0)
    (batch,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)[0]
    _send(acc, q["t"], 0)  # a newer batch behind it
    acc.reenqueue(batch, clock.monotonic_ms())
    assert batch.attempts == 1
    result = acc.ready(cluster(leaders), clock.monotonic_ms())
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == 100  # backoff 100 ms with max 100: no jitter
    assert acc.drain(cluster(leaders), [NODE0], 1 << 20, clock.monotonic_ms()) == {}
    clock.advance(100)
    assert acc.ready(cluster(leaders), clock.monotonic_ms()).ready_nodes == {NODE0}
    (again,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, clock.monotonic_ms())[0]
    assert again is batch


def test_backoff_grows_exponentially_up_to_the_maximum() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    _send(acc, q["t"], 0)
    (batch,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)[0]
    backoffs = []
    for _ in range(6):
        acc.reenqueue(batch, 0)
        backoffs.append(batch.retry_at_ms)
        acc.drain(cluster(leaders), [NODE0], 1 << 20, 10_000)
    assert 80 <= backoffs[0] <= 120
    assert 160 <= backoffs[1] <= 240
    assert 320 <= backoffs[2] <= 480
    assert all(800 <= b <= 1200 for b in backoffs[4:])


def test_batches_expire_at_delivery_timeout() -> None:
    clock = MockClock()
    leaders = {"t": [None]}
    acc, q = _setup(clock, leaders, linger_ms=0, delivery_timeout_ms=5000)
    _send(acc, q["t"], 0)
    clock.advance(2000)
    _send(acc, q["t"], 0, n=20)  # a second batch, two seconds younger
    result = acc.ready(cluster(leaders), clock.monotonic_ms())
    assert result.next_ready_check_delay_ms == 3000  # woken for the expiry, with no leader
    assert acc.expired_batches(clock.monotonic_ms()) == []
    clock.advance(3000)
    expired = acc.expired_batches(clock.monotonic_ms())
    assert len(expired) == 1
    clock.advance(2000)
    assert len(acc.expired_batches(clock.monotonic_ms())) >= 1


def test_flush_makes_lingering_batches_ready() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=60_000)
    _send(acc, q["t"], 0)
    assert acc.ready(cluster(leaders), 0).ready_nodes == set()
    acc.begin_flush()
    assert acc.ready(cluster(leaders), 0).ready_nodes == {NODE0}
    acc.end_flush()
    assert acc.ready(cluster(leaders), 0).ready_nodes == set()


def test_await_flush_completion_waits_for_batches_created_before_the_flush() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0)
    _send(acc, q["t"], 0)
    upto = acc.begin_flush()
    (batch,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)[0]
    _send(acc, q["t"], 0)  # after the flush started: not waited for
    assert acc.await_flush_completion(upto, timeout_s=0) is False  # times out at once
    batch.complete(0, -1)
    acc.deallocate(batch)
    assert acc.await_flush_completion(upto, timeout_s=0) is True
    acc.end_flush()


def test_exhausted_memory_fails_the_send_after_max_block_ms() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=60_000, batch_size=1000, buffer_memory=1500)
    _send(acc, q["t"], 0)
    with pytest.raises(BufferExhaustedError, match="'buffer.memory' \\(1500 bytes\\) is full"):
        acc.append(q["t"], 0, 0, None, bytes(950), None, None, 500, 1032)
    assert clock.monotonic_ms() == 500


def test_a_send_blocked_on_memory_makes_batches_ready() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=60_000, batch_size=1000)
    blocked = threading.Event()

    def wait(condition: threading.Condition, timeout_ms: int) -> None:
        blocked.set()  # still holding the pool's lock: it is released by the wait below
        condition.wait()  # until close(); time stands still

    acc.pool = BufferPool(1500, clock, wait=wait)
    _send(acc, q["t"], 0)
    assert acc.ready(cluster(leaders), 0).ready_nodes == set()
    errors: list[BaseException] = []

    def blocked_send() -> None:
        try:
            acc.append(q["t"], 0, 0, None, bytes(950), None, None, 60_000, 1032)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=blocked_send, daemon=True)
    thread.start()
    assert blocked.wait(10), "the send never blocked for memory"  # a safety net only
    assert acc.ready(cluster(leaders), 0).ready_nodes == {NODE0}
    acc.pool.close()
    thread.join(10)
    assert not thread.is_alive()
    assert isinstance(errors[0], IllegalStateError)


def test_append_after_close_fails_and_close_makes_everything_ready() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=60_000)
    _send(acc, q["t"], 0)
    acc.closed = True
    assert acc.ready(cluster(leaders), 0).ready_nodes == {NODE0}
    with pytest.raises(IllegalStateError, match="after the producer is closed"):
        _send(acc, q["t"], 0)


def test_keyless_records_stick_to_one_partition_for_batch_size_bytes() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0] * 4}
    acc, q = _setup(clock, leaders, linger_ms=0, batch_size=1024)
    futures = _send(acc, q["t"], -1, n=200)
    while acc.has_undrained():
        for batch in acc.drain(cluster(leaders), [NODE0], 1 << 20, 0).get(0, []):
            batch.complete(0, -1)
    partitions = [f.result().partition for f in futures]
    runs: list[list[int]] = [[partitions[0]]]
    for p in partitions[1:]:
        if p == runs[-1][-1]:
            runs[-1].append(p)
        else:
            runs.append([p])
    assert len(runs) >= 5
    assert len(set(partitions)) > 1
    # ~108 bytes per record: a switch only after at least batch.size (1024) bytes
    assert all(len(run) >= 1024 // 108 for run in runs[:-1])


def test_new_batch_wakes_the_sender_once_per_batch() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0, batch_size=1024)
    wakeups = []
    acc.wakeup = lambda: wakeups.append(1)
    _send(acc, q["t"], 0, n=16)  # 8 records per 1 KiB batch
    assert len(wakeups) == 2


def test_split_and_reenqueue_keeps_order_and_batch_size() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0, batch_size=4096)
    futures = _send(acc, q["t"], 0, n=40, value=bytes(50))
    (batch,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)[0]
    _send(acc, q["t"], 0)  # a newer batch queued behind
    acc.batch_size = 1024  # as if the broker only takes 1 KiB batches
    children = acc.split_and_reenqueue(batch, 0)
    assert [c.record_count for c in children] == [16, 16, 8]
    drained = []
    while acc.has_undrained():
        drained.extend(acc.drain(cluster(leaders), [NODE0], 1, 0)[0])
    assert drained[:3] == children
    assert drained[3].record_count == 1
    for offset, child in enumerate(children):
        child.complete(offset * 1000, -1)
    assert [f.result().offset for f in futures[15:18]] == [15, 1000, 1001]


def test_a_retried_batch_takes_no_more_records() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0]}
    acc, q = _setup(clock, leaders, linger_ms=0)
    (first,) = _send(acc, q["t"], 0)
    (batch,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, 0)[0]
    acc.reenqueue(batch, 0)
    (second,) = _send(acc, q["t"], 0)  # goes to a new batch behind the retry
    clock.advance(1000)
    (again,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, clock.monotonic_ms())[0]
    assert again is batch and again.record_count == 1
    (newer,) = acc.drain(cluster(leaders), [NODE0], 1 << 20, clock.monotonic_ms())[0]
    assert newer.record_count == 1
    again.complete(0, -1)
    newer.complete(1, -1)
    assert (first.result(0).offset, second.result(0).offset) == (0, 1)


def test_drain_of_a_few_batches_among_many_partitions_keeps_the_rotation_order() -> None:
    clock = MockClock()
    leaders = {"t": [NODE0] * 20}
    acc, q = _setup(clock, leaders, linger_ms=0)
    for partition in (17, 3, 9):  # queued in another order than the partitions'
        _send(acc, q["t"], partition)
    order = []
    for _ in range(3):  # one batch per request (max_request_size 1)
        (batch,) = acc.drain(cluster(leaders), [NODE0], 1, 0)[0]
        order.append(batch.tp.partition)
    assert order == [3, 9, 17]
    assert not acc.has_undrained()


def _drain_script(monkeypatch: pytest.MonkeyPatch, *, visit_only_pending: bool) -> list[object]:
    """Sends and drains over two topics led by two nodes (muted partitions, a retry in
    backoff, size limits); what each drain returned."""
    import kclient.sender.drain as module

    monkeypatch.setattr(module, "_FEW_PENDING", 1 << 30 if visit_only_pending else -1)
    monkeypatch.setattr(module, "_MANY_PARTITIONS", 0)
    clock = MockClock()
    leaders = {"a": [NODE0, NODE1] * 8, "b": [NODE1, NODE0, NODE0] * 4}
    acc, q = _setup(clock, leaders, linger_ms=0, retry_backoff_ms=50, retry_backoff_max_ms=50)
    outcomes: list[object] = []

    def drain(max_request_size: int) -> None:
        drained = acc.drain(
            cluster(leaders), [NODE0, NODE1], max_request_size, clock.monotonic_ms()
        )
        outcomes.append(
            ({node: [b.tp for b in batches] for node, batches in drained.items()}, acc.more_ready)
        )
        for batches in drained.values():
            for batch in batches:
                if batch.tp == TopicPartition("a", 4) and batch.attempts == 0:
                    acc.reenqueue(batch, clock.monotonic_ms())  # a retry 50 ms later

    for step, (topic, partition) in enumerate(
        [("a", 4), ("b", 7), ("a", 15), ("b", 2), ("a", 0), ("b", 11), ("a", 9), ("b", 0)]
    ):
        _send(acc, q[topic], partition, n=1 + step % 3)
        if step == 3:
            acc.mute(TopicPartition("b", 7))
        drain(1 if step % 2 else 1 << 20)
    acc.unmute(TopicPartition("b", 7))
    for partition in range(16):
        _send(acc, q["a"], partition)
    for _ in range(40):
        if not acc.has_undrained():
            break
        drain(300)
        clock.advance(20)
    assert not acc.has_undrained()
    return outcomes


def test_drain_of_a_few_batches_returns_what_the_full_walk_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = _drain_script(monkeypatch, visit_only_pending=True)
    assert fast == _drain_script(monkeypatch, visit_only_pending=False)
    assert len(fast) > 10
