"""``kclient.sender.appender``: the C ``Appender`` (and its ``Lock``) against the pure-Python
``PyAppender`` and the pure-Python record builder — the same batches byte for byte, the same
futures, the same sticky partitions — and what a caller of ``append`` sees from either."""

from __future__ import annotations

import gc
import inspect
import random
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.errors import IllegalStateError
from kclient.record import RecordBatch, _accel
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.appender import PyAppender, make_appender
from kclient.sender.buffer_pool import BufferPool
from kclient.sender.topic_queues import TopicQueues, estimate_size_upper_bound
from kclient.testing import MockClock
from tests.sender.helpers import NODE0, accumulator, cluster

needs_c = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="the C accelerator is not built (or KCLIENT_PURE_PYTHON)"
)
LEADERS = {"t": [NODE0, NODE0, NODE0]}

# (partition or -1, timestamp or None, key, value, headers, with a callback)
Op = tuple[int, int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]], bool]
ops_strategy = st.lists(
    st.tuples(
        st.sampled_from([-1, -1, -1, 0, 2]),
        st.one_of(st.none(), st.integers(0, 2**40)),
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                 max_size=2),
        st.booleans(),
    ),
    max_size=120,
)  # fmt: skip


def _run(ops: list[Op], kind: str) -> list[Any]:
    """Sends ``ops`` through an accumulator with the C appender ("c"), the Python appender
    over the C builder ("py-appender") or everything in Python ("python"); what came out:
    each future's fields, the callbacks' batches, and every batch drained, built."""
    clock = MockClock()
    with pytest.MonkeyPatch.context() as patch:
        if kind == "python":
            patch.setattr(_accel, "ACCELERATED", False)
        acc = accumulator(clock, batch_size=700, linger_ms=0)
        if kind != "c":
            acc.appender = PyAppender(lambda: clock.time_ms() * 1_000_000)
        queues = acc.topic_queues("t")
        acc.update_cluster(cluster(LEADERS))
        seen: list[Any] = []
        batches: dict[int, int] = {}
        for partition, ts, key, value, headers, with_callback in ops:
            clock.advance(1)
            size = estimate_size_upper_bound(key, value, headers)
            callback = (lambda md, exc: None) if with_callback else None
            future = acc.append(queues, partition, ts, key, value, headers, callback, 0, size)
            result = future.produce_result
            batch_no = batches.setdefault(id(result), len(batches))
            seen.append(
                (
                    result.tp,
                    batch_no,
                    future.offset_delta,
                    future.timestamp_ms,
                    future.key_size,
                    future.value_size,
                    queues.sticky.partition,
                    queues.sticky.produced_bytes,
                )
            )
        drained = acc.drain(cluster(LEADERS), [NODE0], 1 << 30, clock.monotonic_ms())
        while drained:
            for batch in drained[0]:
                thunks = [callable(x) or x for x in batch.thunks or ()]  # each run's lambda
                seen.append((batch.tp, batch.records, thunks))
            drained = acc.drain(cluster(LEADERS), [NODE0], 1 << 30, clock.monotonic_ms())
    return seen


@needs_c
@settings(max_examples=60, deadline=None)
@given(ops=ops_strategy)
def test_the_c_appender_makes_what_the_python_one_makes(ops: list[Op]) -> None:
    c = _run(ops, "c")
    assert c == _run(ops, "py-appender")
    assert c == _run(ops, "python")


def test_batches_hold_the_records_sent_in_order() -> None:
    ops: list[Op] = [(0, 5, b"k%d" % i, b"v" * i, [], False) for i in range(40)]
    seen = _run(ops, "c" if _accel.ACCELERATED else "python")
    records = [
        (r.key, r.value) for item in seen if len(item) == 3 for r in RecordBatch(item[1]).records()
    ]
    assert records == [(b"k%d" % i, b"v" * i) for i in range(40)]


@pytest.fixture(params=["c", "python"])
def acc(request: pytest.FixtureRequest) -> Iterator[RecordAccumulator]:
    if request.param == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    clock = MockClock(start_ms=1_700_000_000_123)
    accumulator_ = accumulator(clock, batch_size=1024)
    if request.param == "python":
        accumulator_.appender = PyAppender(lambda: clock.time_ms() * 1_000_000)
    accumulator_.update_cluster(cluster(LEADERS))
    yield accumulator_


def _append(acc: RecordAccumulator, partition: int = -1, ts: int | None = 5, **kw: Any) -> Any:
    queues = acc.topic_queues("t")
    value = kw.get("value", b"v" * 100)
    args = (queues, partition, ts, None, value, kw.get("headers"), kw.get("callback"), 182)
    return acc.appender.append(*args)


def test_append_open_returns_none_without_an_open_batch(acc: RecordAccumulator) -> None:
    assert _append(acc, 0) is None  # nothing queued yet: the caller opens a batch
    first = acc.append(acc.topic_queues("t"), 0, 5, None, b"x", None, None, 0, 83)
    assert _append(acc, 0).produce_result is first.produce_result
    assert _append(acc, 1) is None


def test_a_record_that_does_not_fit_is_not_appended(acc: RecordAccumulator) -> None:
    acc.append(acc.topic_queues("t"), 0, 5, None, b"x", None, None, 0, 83)
    assert _append(acc, 0, value=b"v" * 2000) is None
    (batch,) = acc.topic_queues("t").deques[0]
    assert batch.record_count == 1


def test_a_batch_back_for_a_retry_takes_no_more_records(acc: RecordAccumulator) -> None:
    acc.append(acc.topic_queues("t"), 0, 5, None, b"x", None, None, 0, 83)
    (batch,) = acc.drain(cluster(LEADERS), [NODE0], 1 << 20, 0)[0]
    acc.reenqueue(batch, 0)
    assert _append(acc, 0) is None
    assert batch.record_count == 1


def test_closed_appender_raises(acc: RecordAccumulator) -> None:
    acc.append(acc.topic_queues("t"), 0, 5, None, b"x", None, None, 0, 83)
    acc.closed = True
    assert acc.appender.closed
    with pytest.raises(IllegalStateError, match="closed"):
        _append(acc, 0)
    assert not acc.topic_queues("t").lock.locked()


def test_no_timestamp_is_now_by_the_wall_clock(acc: RecordAccumulator) -> None:
    acc.append(acc.topic_queues("t"), 0, None, None, b"x", None, None, 0, 83)
    future = _append(acc, 0, ts=None)
    assert future.timestamp_ms == 1_700_000_000_123
    (batch,) = acc.topic_queues("t").deques[0]
    timestamps = [r.timestamp for r in RecordBatch(batch.close()).records()]
    assert timestamps == [1_700_000_000_123] * 2


def test_callbacks_are_registered_with_the_batch(acc: RecordAccumulator) -> None:
    acc.append(acc.topic_queues("t"), 0, 5, None, b"x", None, None, 0, 83)
    calls: list[object] = []
    future = _append(acc, 0, callback=lambda md, exc: calls.append(md))
    (batch,) = acc.topic_queues("t").deques[0]
    assert batch.thunks is not None
    assert batch.thunks[:4] == [future.offset_delta, 5, -1, 100]  # delta, time, key, value sizes


def test_an_error_in_the_callback_registration_releases_the_lock(
    acc: RecordAccumulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc.append(acc.topic_queues("t"), 0, 5, None, b"x", None, None, 0, 83)
    (batch,) = acc.topic_queues("t").deques[0]

    def fail(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(type(batch), "add_callback", fail)
    with pytest.raises(RuntimeError, match="boom"):
        _append(acc, 0, callback=lambda md, exc: None)
    assert not acc.topic_queues("t").lock.locked()


@needs_c
def test_the_c_appender_refuses_other_objects() -> None:
    appender = make_appender(lambda: 0)
    with pytest.raises(TypeError, match="queues must be"):
        appender.append(object(), 0, 5, None, b"x", None, None, 83)  # type: ignore[arg-type]
    queues = TopicQueues("t", 1024, random.Random(1))
    queues.lock = threading.Lock()  # type: ignore[assignment]
    with pytest.raises(TypeError, match="lock must be"):
        appender.append(queues, 0, 5, None, b"x", None, None, 83)
    queues = TopicQueues("t", 1024, random.Random(1))
    queues.deques[0].append(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a queued batch must be"):
        appender.append(queues, 0, 5, None, b"x", None, None, 83)
    queues.sticky = object()  # type: ignore[assignment]
    with pytest.raises(TypeError, match="sticky must be"):
        appender.append(queues, -1, 5, None, b"x", None, None, 83)
    assert not queues.lock.locked()


# ---- the C Lock -----------------------------------------------------------------------------


def _locks() -> list[Callable[[], Any]]:
    if not _accel.ACCELERATED:
        return [threading.Lock]
    from kclient.sender._speedups import Lock

    return [threading.Lock, Lock]


@pytest.mark.parametrize("make", _locks())
def test_lock_behaves_as_threading_lock(make: Callable[[], Any]) -> None:
    lock = make()
    assert not lock.locked()
    assert lock.acquire()
    assert lock.locked()
    assert not lock.acquire(False)
    assert not lock.acquire(True, 0.01)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()
    with lock:
        assert lock.locked()
    assert not lock.locked()
    with pytest.raises(ValueError):
        lock.acquire(False, 1)


@pytest.mark.parametrize("make", _locks())
def test_lock_excludes_other_threads(make: Callable[[], Any]) -> None:
    lock = make()
    counter = [0]

    def work() -> None:
        for _ in range(2000):
            with lock:
                value = counter[0]
                counter[0] = value + 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert counter[0] == 8000
    lock.acquire()
    released = threading.Timer(0.05, lock.release)
    released.start()
    assert lock.acquire(True, 5)  # waits (GIL released) until the other thread releases
    released.join(5)


# ---- send_open: KafkaProducer.send's common case -------------------------------------------

SendOp = tuple[object, object, object, object, object]  # topic, value, key, partition, headers
send_ops = st.lists(
    st.tuples(
        st.sampled_from(["t", "t", "t", "unknown"]),
        st.one_of(st.none(), st.binary(max_size=300), st.just(bytearray(b"ba")), st.just("s")),
        st.one_of(st.none(), st.none(), st.binary(max_size=12), st.just(7)),
        st.one_of(st.none(), st.none(), st.integers(-2, 4), st.just(True)),
        st.sampled_from([None, None, [], (), [("h", b"1")]]),
    ),
    max_size=80,
)  # fmt: skip


def _keyed(key: bytes, count: int) -> int:
    return len(key) % count


def _run_send(
    ops: list[SendOp], kind: str, keyed: bool, sticky: bool, open_batch: bool = False
) -> list[Any]:
    """``send_open`` of ``ops`` through the C or the Python appender (new batches opened by
    the accumulator if ``open_batch``): what each returned, then every batch built."""
    clock = MockClock()
    acc = accumulator(clock, batch_size=700, linger_ms=0)
    if kind != "c":
        acc.appender = PyAppender(lambda: clock.time_ms() * 1_000_000)
    queues = {"t": acc.topic_queues("t")}
    acc.appender.configure_send(
        queues, 400, _keyed if keyed else None, sticky, acc.open_batch_now if open_batch else None
    )
    acc.update_cluster(cluster(LEADERS))
    acc.append(queues["t"], 0, 1, None, b"", None, None, 0, 82)  # partition 0 has a batch
    acc.append(queues["t"], 2, 1, None, b"", None, None, 0, 82)
    queues["t"].sticky.partition = 0  # keyless records go where a batch is open
    seen: list[Any] = []
    for topic, value, key, partition, headers in ops:
        clock.advance(1)
        future = acc.appender.send_open(
            topic,  # type: ignore[arg-type]
            value,
            key,
            partition,
            None,
            headers,  # type: ignore[arg-type]
            None,
        )
        if future is None:
            seen.append(None)
        else:
            sticky = queues["t"].sticky
            seen.append(
                (
                    future.produce_result.tp,
                    future.offset_delta,
                    future.timestamp_ms,
                    (sticky.partition, sticky.produced_bytes),
                )
            )
    for dq in queues["t"].deques.values():
        seen.extend((batch.tp, batch.close()) for batch in dq)
    return seen


@needs_c
@settings(max_examples=60, deadline=None)
@given(ops=send_ops, keyed=st.booleans(), sticky=st.booleans(), open_batch=st.booleans())
def test_the_c_send_open_does_what_the_python_one_does(
    ops: list[SendOp], keyed: bool, sticky: bool, open_batch: bool
) -> None:
    assert _run_send(ops, "c", keyed, sticky, open_batch) == _run_send(
        ops, "python", keyed, sticky, open_batch
    )


@pytest.mark.parametrize("kind", ["c", "python"])
@pytest.mark.parametrize(
    ("op", "taken"),
    [
        (("t", b"v", None, None, None), True),
        (("t", b"v", b"key", None, None), True),  # to _keyed's partition: 3 % 3 = 0
        (("t", b"v", None, 2, []), True),
        (("t", b"v", None, 1, None), False),  # partition 1 has no open batch
        (("t", b"v", None, 3, None), False),  # not a partition (yet): send waits or refuses
        (("t", b"v", None, -1, None), False),  # send raises ValueError
        (("unknown", b"v", None, None, None), False),  # no metadata yet
        (("t", "text", None, None, None), False),  # to be converted (or refused)
        (("t", b"v", None, None, [("h", b"1")]), False),  # headers: the general way
        (("t", b"v" * 400, None, None, None), False),  # too large: send raises
    ],
)
def test_send_open_takes_only_the_common_case(kind: str, op: SendOp, taken: bool) -> None:
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    seen = _run_send([op], kind, keyed=True, sticky=True)
    assert (seen[0] is not None) == taken
    records = sum(RecordBatch(data).record_count for _, data in seen[1:])
    assert records == 2 + taken  # nothing appended when not taken


@pytest.mark.parametrize("kind", ["c", "python"])
def test_send_open_leaves_keys_and_keyless_records_to_a_custom_partitioner(kind: str) -> None:
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    seen = _run_send(
        [("t", b"v", b"k", None, None), ("t", b"v", None, None, None), ("t", b"v", None, 0, None)],
        kind,
        keyed=False,
        sticky=False,
    )
    assert seen[0] is None and seen[1] is None
    assert seen[2] is not None  # an explicit partition needs no partitioner


@pytest.mark.parametrize("kind", ["c", "python"])
def test_send_open_opens_a_batch_while_memory_is_free(kind: str) -> None:
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    ops: list[SendOp] = [("t", b"v", None, 1, None)] + [("t", b"w" * 300, None, 0, None)] * 3
    seen = _run_send(ops, kind, keyed=True, sticky=True, open_batch=True)
    assert seen[0] is not None and seen[0][0] == ("t", 1)  # partition 1 had no batch
    assert all(future is not None and future[0] == ("t", 0) for future in seen[1:4])
    assert seen[3][1] == 0  # partition 0's batch was full: the first record of a new one
    batches = sorted((tp, RecordBatch(data).record_count) for tp, data in seen[4:])
    assert batches == [(("t", 0), 1), (("t", 0), 3), (("t", 1), 1), (("t", 2), 1)]


@pytest.mark.parametrize("kind", ["c", "python"])
def test_send_open_leaves_a_new_batch_to_the_general_way_when_memory_is_short(
    kind: str,
) -> None:
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    clock = MockClock()
    acc = accumulator(clock, batch_size=700, linger_ms=0)
    if kind != "c":
        acc.appender = PyAppender(lambda: clock.time_ms() * 1_000_000)
    queues = {"t": acc.topic_queues("t")}
    acc.appender.configure_send(queues, 400, None, True, acc.open_batch_now)
    acc.update_cluster(cluster(LEADERS))
    free = acc.pool.available_bytes
    acc.pool.allocate(free - 699, 0)  # one byte short of a batch
    assert acc.appender.send_open("t", b"v", None, 1, None, None, None) is None
    assert acc.pool.available_bytes == 699 and not queues["t"].deques[1]  # nothing taken
    acc.pool.deallocate(1)
    future = acc.appender.send_open("t", b"v", None, 1, None, None, None)
    assert future is not None and acc.pool.available_bytes == 0 and len(queues["t"].deques[1]) == 1


@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_batch_that_fails_to_open_gives_its_memory_back(kind: str) -> None:
    # send_open's new batch (open_batch_now): an error after memory was reserved
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")

    def broken_builder(size: int) -> Any:
        raise MemoryError("no batch today")

    clock = MockClock()
    pool = BufferPool(1 << 20, clock)
    acc = RecordAccumulator(
        batch_size=700,
        linger_ms=0,
        retry_backoff_ms=100,
        retry_backoff_max_ms=100,
        delivery_timeout_ms=120_000,
        pool=pool,
        builder_factory=broken_builder,
        monotonic_ms=clock.monotonic_ms,
    )
    if kind != "c":
        acc.appender = PyAppender(lambda: 0)
    queues = {"t": acc.topic_queues("t")}
    acc.appender.configure_send(queues, 400, None, True, acc.open_batch_now)
    acc.update_cluster(cluster(LEADERS))
    free = acc.pool.available_bytes
    with pytest.raises(MemoryError, match="no batch today"):
        acc.appender.send_open("t", b"v", None, 1, None, None, None)
    assert acc.pool.available_bytes == free and not queues["t"].deques[1]
    assert not acc.incomplete


@pytest.mark.parametrize("kind", ["c", "python"])
def test_open_batch_must_be_callable(kind: str) -> None:
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    acc = accumulator(MockClock())
    if kind != "c":
        acc.appender = PyAppender(lambda: 0)
    with pytest.raises(TypeError, match="open_batch must be callable"):
        acc.appender.configure_send({}, 400, None, True, 5)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["c", "python"])
def test_an_accumulator_and_its_appender_are_collected(kind: str) -> None:
    # the appender holds the accumulator's open_batch_now: a cycle the collector must free
    if kind == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON)")
    acc = accumulator(MockClock())
    if kind != "c":
        acc.appender = PyAppender(lambda: 0)
    acc.appender.configure_send({}, 400, None, True, acc.open_batch_now)
    gone = weakref.ref(acc)
    del acc
    gc.collect()
    assert gone() is None


# ---- KafkaProducer.send through C (SendCall) -----------------------------------------------


def _idle_producer() -> Any:
    from kclient.producer import KafkaProducer
    from kclient.testing.client import MockClient, metadata_update_with

    clock = MockClock()
    client = MockClient(clock, metadata_update_with(1, {"t": 1}))
    return KafkaProducer(
        bootstrap_servers="127.0.0.1:9092",
        linger_ms=600_000,
        batch_size=400,
        kafka_client=client,
        clock=clock,
    )


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("t", b"v"), {}),
    (("t", b"v", b"k"), {}),
    (("t",), {"value": b"v", "key": b"k2"}),
    ((), {"topic": "t", "value": b"v"}),
    (("t", b"v"), {"partition": 0, "timestamp_ms": 77}),
    (("t", b"v"), {"headers": [("h", b"1")], "callback": lambda md, exc: None}),
    (("t", b"v" * 300), {}),  # opens a batch: the general way
    (("t", "text"), {}),  # converted by the general way
    (("t", b"v"), {**{"val" + "ue": None}}),  # keyword names not interned (no value twice)
    (("t", b"v"), {"partition": -1}),  # ValueError
    (("t", b"v"), {"bogus": 1}),  # TypeError
    (("t", b"v"), {"value": b"twice"}),  # TypeError
    ((), {}),  # TypeError
    (("t", b"v", None, None), {}),  # TypeError: headers are keyword-only
    (("t", b"v" * 2_000_000), {}),  # RecordTooLargeError
]


def _outcomes(send: Callable[..., Any]) -> list[Any]:
    outcomes: list[Any] = []
    for args, kwargs in CALLS:
        try:
            future = send(*args, **kwargs)
        except Exception as exc:  # noqa: PERF203 -- the outcome compared
            outcomes.append((type(exc).__name__, str(exc)))
        else:
            result = future.produce_result
            outcomes.append(
                (result.tp, future.offset_delta, future.timestamp_ms, future.key_size,
                 future.value_size)
            )  # fmt: skip
    return outcomes


@needs_c
def test_send_through_c_does_what_the_python_send_does() -> None:
    from kclient.producer import KafkaProducer

    python_send = KafkaProducer.send  # on the class: the Python function
    assert python_send.__name__ == "send" and "Queue a record" in (python_send.__doc__ or "")
    first, second = _idle_producer(), _idle_producer()
    try:
        assert type(first.send).__name__ == "SendCall"
        # what help() and inspect show of it: the Python send's docstring and signature
        assert first.send.__doc__ == python_send.__doc__
        assert inspect.signature(first.send) == inspect.signature(python_send.__get__(second))
        assert "timestamp_ms" in inspect.signature(first.send).parameters
        assert _outcomes(first.send) == _outcomes(lambda *a, **k: python_send(second, *a, **k))
    finally:
        first.close(0)
        second.close(0)


def test_a_bool_partition_is_refused_even_where_a_batch_is_open() -> None:
    from kclient.producer import KafkaProducer
    from kclient.testing.client import MockClient, metadata_update_with

    clock = MockClock()
    client = MockClient(clock, metadata_update_with(1, {"t": 2}))
    producer = KafkaProducer(
        bootstrap_servers="127.0.0.1:9092", linger_ms=600_000, kafka_client=client, clock=clock
    )
    try:
        producer.send("t", b"v", partition=1)  # partition 1 has an open batch now
        with pytest.raises(TypeError, match="partition must be an int"):
            producer.send("t", b"v", partition=True)
    finally:
        producer.close(0)


def test_send_after_close_raises() -> None:
    producer = _idle_producer()
    send = producer.send
    send("t", b"v")
    producer.close(0)
    assert producer.send.__func__ is type(producer).send  # the Python send again
    for call in (producer.send, send):  # also through C, when fetched before close
        with pytest.raises(IllegalStateError):
            call("t", b"v")


def test_a_dropped_producer_is_freed_by_reference_counting() -> None:
    # producer.send (C) holds its producer weakly: no cycle keeps the producer alive
    producer = _idle_producer()
    producer.send("t", b"v")
    gone = weakref.ref(producer)
    sender, thread = producer._sender, producer._thread
    gc.disable()
    try:
        del producer
        assert gone() is None
    finally:
        gc.enable()
        # dropped, it closes as it can: its record waits on a mock clock that never moves,
        # so its I/O thread would spin for the rest of the test run
        sender.force_close()
        thread.join(10)
    assert not thread.is_alive()


def test_a_record_futures_fields_are_its_constructors_arguments() -> None:
    """``RecordFutureFields`` (the C struct when built, else its Python reference): what
    ``FutureRecordMetadata``'s constructor takes is what the future reports."""
    from kclient.network.cluster import TopicPartition
    from kclient.sender.future import FutureRecordMetadata, ProduceResult, RecordFutureFields

    if _accel.ACCELERATED:
        from kclient.sender import _speedups

        assert RecordFutureFields is _speedups.RecordFutureFields
    result = ProduceResult(TopicPartition("t", 0))
    fields = RecordFutureFields(result, 3, 1_700_000_000_000, 4)
    assert (
        fields.produce_result,
        fields.offset_delta,
        fields.timestamp_ms,
        fields.key_size,
        fields.value_size,
    ) == (result, 3, 1_700_000_000_000, 4, -1)
    future = FutureRecordMetadata(result, 2, 5, -1, 100)
    assert isinstance(future, RecordFutureFields)
    result.set(10, -1, None, finish=True)
    metadata = future.result(0)
    assert (metadata.offset, metadata.timestamp, metadata.serialized_value_size) == (12, 5, 100)


def test_the_appenders_fields_are_attributes_of_their_classes() -> None:
    """``TopicQueuesFields``, ``StickyFields``, ``BatchFields`` (the C structs when built,
    else their Python references): the classes' bases, their fields ordinary attributes, an
    object field not set yet an AttributeError (as an unset ``__slots__`` member)."""
    from kclient.network.cluster import TopicPartition
    from kclient.record.builder import RecordBatchBuilder
    from kclient.sender.batch import BatchFields, ProducerBatch
    from kclient.sender.partitioner import StickyFields, StickyPartitioner
    from kclient.sender.topic_queues import TopicQueuesFields

    if _accel.ACCELERATED:
        from kclient.sender import _speedups

        assert (TopicQueuesFields, StickyFields, BatchFields) == (
            _speedups.TopicQueuesFields,
            _speedups.StickyFields,
            _speedups.BatchFields,
        )
    queues = TopicQueues("t", 1024, random.Random(1))
    assert isinstance(queues, TopicQueuesFields)
    assert isinstance(queues.sticky, StickyFields)
    assert (queues.num_partitions, queues.sticky.partition, queues.sticky.sticky_bytes) == (
        0,
        -1,
        1024,
    )
    queues.resize(3)
    queues.sticky.produced_bytes += 500
    assert (queues.num_partitions, queues.sticky.produced_bytes) == (3, 500)
    sticky = StickyPartitioner(10, random.Random(1))
    sticky.update_partitions(2, [1])
    assert (sticky.partition, sticky.produced_bytes) == (1, 0)
    batch = ProducerBatch(TopicPartition("t", 0), RecordBatchBuilder(batch_size=1024), 0, 0)
    assert isinstance(batch, BatchFields)
    assert batch.records is None and batch.result.tp == TopicPartition("t", 0)
    batch.records = b"built"
    assert batch.records == b"built"
    with pytest.raises(AttributeError):
        TopicQueuesFields().lock  # noqa: B018 (the read is the test)
    with pytest.raises(AttributeError):
        BatchFields().builder  # noqa: B018
