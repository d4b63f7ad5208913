"""``kclient.spark`` without a JVM: settings checked on the driver, Arrow batches and Rows
turned into ``send`` calls, and the per-worker ``ProducerCache`` (with a manual clock)."""

from __future__ import annotations

import datetime as dt
import pickle
import queue
import threading
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Row

from kclient.errors import ConfigError, IllegalStateError
from kclient.spark import KafkaSink, ProducerCache, SinkSchemaError, write_dataframe
from kclient.spark.sink import _BatchingSend

BOOTSTRAP: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9"}
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


class Sends:
    """Stands in for ``KafkaProducer.send``; keeps every call."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> None:
        self.calls.append({"topic": topic, "value": value, "key": key, **kw})

    def column(self, name: str) -> list[Any]:
        return [c[name] for c in self.calls]


def on_delivery(_metadata: object, _exc: BaseException | None) -> None:
    pass


def send_batch(sink: KafkaSink, **columns: Any) -> Sends:
    sends = Sends()
    batch = pa.RecordBatch.from_pydict(columns)
    assert sink.send_batch(sends, batch, on_delivery) == batch.num_rows
    assert len(sends.calls) == batch.num_rows
    return sends


# ---- settings, checked where the sink is built (the driver) -------------------------------


def test_an_unknown_producer_setting_fails_on_the_driver() -> None:
    with pytest.raises(ConfigError, match="unknown producer setting 'linger_msec'"):
        KafkaSink("t", linger_msec=5, **BOOTSTRAP)


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="'bootstrap.servers' is required"):
        KafkaSink("t")


@pytest.mark.parametrize("setting", ["value.serializer", "key_serializer"])
def test_serializers_are_refused_because_columns_are_sent_as_bytes(setting: str) -> None:
    with pytest.raises(ConfigError, match=f"'{setting}' cannot be set for the Spark sink"):
        KafkaSink("t", **{setting: "json", **BOOTSTRAP})


@pytest.mark.parametrize("topic", ["", 5])
def test_topic_argument_must_be_a_non_empty_string(topic: Any) -> None:
    with pytest.raises(ConfigError, match="topic must be a non-empty string"):
        KafkaSink(topic, **BOOTSTRAP)


def test_idle_time_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="producer_idle_s must be positive"):
        KafkaSink("t", producer_idle_s=0, **BOOTSTRAP)


def test_write_dataframe_points_streaming_dataframes_to_foreach_batch() -> None:
    streaming = SimpleNamespace(isStreaming=True)
    with pytest.raises(IllegalStateError, match=r"writeStream\.foreachBatch\(foreach_batch"):
        write_dataframe(streaming, "t", **BOOTSTRAP)


def test_sink_pickles_with_its_settings() -> None:
    sink = pickle.loads(pickle.dumps(KafkaSink("t", linger_ms=20, **BOOTSTRAP)))
    assert sink.topic == "t"
    assert sink.producer_config == {"batch.size": 1_000_000, "linger_ms": 20, **BOOTSTRAP}


def test_the_sink_batches_a_million_bytes_unless_told_otherwise() -> None:
    assert KafkaSink("t", **BOOTSTRAP).producer_config["batch.size"] == 1_000_000
    assert KafkaSink("t", batch_size=5000, **BOOTSTRAP).producer_config == {
        "batch_size": 5000,
        **BOOTSTRAP,
    }


# ---- Arrow batches (write_dataframe) ------------------------------------------------------


def test_string_and_binary_columns_are_sent_as_bytes() -> None:
    sink = KafkaSink("t", **BOOTSTRAP)
    sends = send_batch(
        sink,
        key=pa.array(["k1", None, "ké"], pa.string()),
        value=pa.array([b"\x00\xff", b"", None], pa.binary()),
    )
    assert sends.column("key") == [b"k1", None, "ké".encode()]
    assert sends.column("value") == [b"\x00\xff", b"", None]
    assert sends.column("topic") == ["t", "t", "t"]
    assert sends.column("headers") == [None, None, None]
    assert sends.column("partition") == [None, None, None]
    assert sends.column("timestamp_ms") == [None, None, None]


def test_large_string_and_large_binary_columns_are_sent_as_bytes() -> None:
    sends = send_batch(
        KafkaSink("t", **BOOTSTRAP),
        key=pa.array([b"k", None], pa.large_binary()),
        value=pa.array(["v", "w"], pa.large_string()),
    )
    assert sends.column("key") == [b"k", None]
    assert sends.column("value") == [b"v", b"w"]


def test_all_null_values_are_tombstones() -> None:
    sends = send_batch(KafkaSink("t", **BOOTSTRAP), value=pa.array([None, None], pa.binary()))
    assert sends.column("value") == [None, None]


def test_headers_become_key_value_tuples_per_row() -> None:
    headers = pa.array(
        [
            [{"key": "a", "value": b"1"}, {"key": "b", "value": None}],
            [],
            None,
            [{"key": "c", "value": b""}],
        ],
        HEADERS_TYPE,
    )
    sends = send_batch(KafkaSink("t", **BOOTSTRAP), value=pa.array([b"v"] * 4), headers=headers)
    assert sends.column("headers") == [[("a", b"1"), ("b", None)], None, None, [("c", b"")]]


def test_headers_of_a_sliced_batch_belong_to_their_rows() -> None:
    headers = pa.array(
        [[{"key": f"h{i}", "value": b"x"}] * (i % 3) for i in range(9)], HEADERS_TYPE
    )
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v"] * 9), "headers": headers})
    sends = Sends()
    KafkaSink("t", **BOOTSTRAP).send_batch(sends, batch.slice(4, 4), on_delivery)
    expected = [[(f"h{i}", b"x")] * (i % 3) or None for i in range(4, 8)]
    assert sends.column("headers") == expected


def test_a_header_without_a_key_fails_the_batch() -> None:
    headers = pa.array([[{"key": None, "value": b"1"}]], HEADERS_TYPE)
    with pytest.raises(SinkSchemaError, match="'headers' holds a header with a null key"):
        send_batch(KafkaSink("t", **BOOTSTRAP), value=pa.array([b"v"]), headers=headers)


def test_partition_and_timestamp_columns_with_nulls() -> None:
    utc = dt.timezone.utc
    stamps = pa.array(
        [dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=utc), None, dt.datetime(1970, 1, 1)],
        pa.timestamp("us", tz="UTC"),
    )
    sends = send_batch(
        KafkaSink("t", **BOOTSTRAP),
        value=pa.array([b"a", b"b", b"c"]),
        partition=pa.array([2, None, 0], pa.int32()),
        timestamp=stamps,
    )
    assert sends.column("partition") == [2, None, 0]
    assert sends.column("timestamp_ms") == [1_714_564_800_123, None, 0]


def test_topic_column_routes_rows_and_the_argument_wins() -> None:
    columns = {"topic": pa.array(["a", "b", "a"]), "value": pa.array([b"1", b"2", b"3"])}
    assert send_batch(KafkaSink(None, **BOOTSTRAP), **columns).column("topic") == ["a", "b", "a"]
    assert send_batch(KafkaSink("c", **BOOTSTRAP), **columns).column("topic") == ["c", "c", "c"]


def test_a_null_topic_without_a_topic_argument_fails_before_sending() -> None:
    sends = Sends()
    batch = pa.RecordBatch.from_pydict({"topic": ["a", None], "value": [b"1", b"2"]})
    with pytest.raises(SinkSchemaError, match="null 'topic' and no topic argument"):
        KafkaSink(None, **BOOTSTRAP).send_batch(sends, batch, on_delivery)
    assert sends.calls == []


class BatchSends:
    """Stands in for ``KafkaProducer.send_batch``; keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def send_batch(self, *args: Any) -> str:
        self.calls.append(args)
        return "result"


def test_with_a_topic_argument_a_batch_goes_to_send_batch_in_one_call() -> None:
    producer = BatchSends()
    utc = dt.timezone.utc
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["k1", None], pa.string()),
            "value": pa.array([b"a", None], pa.binary()),
            "partition": pa.array([None, 1], pa.int32()),
            "timestamp": pa.array(
                [dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc), None], pa.timestamp("ms", tz="UTC")
            ),
            "headers": pa.array([[{"key": "h", "value": b"1"}], None], HEADERS_TYPE),
        }
    )
    assert KafkaSink("t", **BOOTSTRAP).send_columns(producer, batch) == "result"
    ((topic, values, keys, headers, partitions, stamps),) = producer.calls
    # the Arrow columns go as they are, for send_batch to read in place; headers as lists
    assert all(isinstance(col, pa.Array) for col in (values, keys, partitions, stamps))
    assert (topic, values.to_pylist(), keys.to_pylist()) == ("t", [b"a", None], ["k1", None])
    assert headers == [[("h", b"1")], None]
    assert (partitions.to_pylist(), stamps.cast(pa.int64()).to_pylist()) == (
        [None, 1],
        [1000, None],
    )


def test_absent_and_all_null_columns_are_not_passed() -> None:
    producer = BatchSends()
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"a"]), "timestamp": pa.array([None], pa.timestamp("ms"))}
    )
    KafkaSink("t", **BOOTSTRAP).send_columns(producer, batch)
    ((topic, values, *others),) = producer.calls
    assert (topic, values.to_pylist(), others) == ("t", [b"a"], [None, None, None, None])


# ---- Rows (foreachPartition) ----------------------------------------------------------------


def test_rows_are_sent_like_arrow_batches() -> None:
    local = dt.datetime(2024, 5, 1, 14, 0, 0, 5000)  # PySpark hands out naive local times
    rows = [
        Row(
            topic="a",
            key="k",
            value=bytearray(b"\x01"),
            partition=1,
            headers=[Row(key="h", value=bytearray(b"x")), Row(key="n", value=None)],
            timestamp=local,
        ),
        Row(topic="b", key=None, value="v", partition=None, headers=[], timestamp=None),
    ]
    sends = Sends()
    assert KafkaSink(None, **BOOTSTRAP).send_rows(sends, rows, on_delivery) == 2
    assert sends.column("topic") == ["a", "b"]
    assert sends.column("key") == [b"k", None]
    assert sends.column("value") == [bytearray(b"\x01"), b"v"]
    assert sends.column("partition") == [1, None]
    assert sends.column("headers") == [[("h", b"x"), ("n", None)], None]
    assert sends.column("timestamp_ms") == [int(local.astimezone().timestamp() * 1000), None]
    assert sends.column("callback") == [on_delivery, on_delivery]


def test_rows_without_a_value_column_fail_naming_it() -> None:
    with pytest.raises(SinkSchemaError, match="column 'value' is required"):
        KafkaSink("t", **BOOTSTRAP).send_rows(Sends(), [Row(payload=b"x")], on_delivery)


def test_rows_without_a_topic_fail_unless_the_argument_is_given() -> None:
    rows = [Row(value=b"x")]
    with pytest.raises(SinkSchemaError, match="column 'topic' is required"):
        KafkaSink(None, **BOOTSTRAP).send_rows(Sends(), rows, on_delivery)
    sends = Sends()
    KafkaSink("t", **BOOTSTRAP).send_rows(sends, rows, on_delivery)
    assert sends.column("topic") == ["t"]


# ---- ProducerCache ----------------------------------------------------------------------------


class FakeProducer:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.closed_with: list[float | None] = []
        self.closed = threading.Event()

    def close(self, timeout: float | None = None) -> None:
        self.closed_with.append(timeout)
        self.closed.set()


class ManualClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def cache() -> tuple[ProducerCache, ManualClock]:
    clock = ManualClock()
    return ProducerCache(FakeProducer, monotonic=clock, reaper=False), clock


def test_tasks_with_the_same_settings_share_one_producer() -> None:
    producers, _ = cache()
    a = producers.acquire({"bootstrap.servers": "h:1", "linger.ms": 5}, 60)
    producers.release(a)
    b = producers.acquire({"linger.ms": 5, "bootstrap.servers": "h:1"}, 60)
    c = producers.acquire({"bootstrap.servers": "h:1", "linger.ms": 6}, 60)
    assert b.producer is a.producer
    assert c.producer is not a.producer
    assert c.producer.config == {"bootstrap.servers": "h:1", "linger.ms": 6}
    assert len(producers) == 2


def test_an_unused_producer_is_closed_after_its_idle_time() -> None:
    producers, clock = cache()
    entry = producers.acquire({"x": 1}, 60)
    clock.now_s += 500  # in use: never idle
    assert producers.close_idle(clock.now_s) == 0
    producers.release(entry)
    clock.now_s += 59.9
    assert producers.close_idle(clock.now_s) == 0
    clock.now_s += 0.1
    assert producers.close_idle(clock.now_s) == 1
    assert entry.producer.closed_with == [None]  # a normal close: delivers what is left
    assert producers.acquire({"x": 1}, 60).producer is not entry.producer


def test_a_producer_that_failed_a_task_is_closed_when_its_last_user_lets_go() -> None:
    producers, _ = cache()
    failed = producers.acquire({"x": 1}, 60)
    other = producers.acquire({"x": 1}, 60)
    producers.release(failed, retire=True)
    assert failed.producer.closed_with == []  # another task still sends with it
    fresh = producers.acquire({"x": 1}, 60)
    assert fresh.producer is not failed.producer  # the retry gets a new producer
    producers.release(other)
    assert failed.producer.closed_with == [0]  # nothing waits for records of a failed task


def test_forget_after_fork_drops_producers_without_closing_them() -> None:
    producers, _ = cache()
    entry = producers.acquire({"x": 1}, 60)
    producers.forget()
    assert len(producers) == 0
    assert entry.producer.closed_with == []
    assert producers.acquire({"x": 1}, 60).producer is not entry.producer


def test_close_all_closes_every_producer() -> None:
    producers, _ = cache()
    entries = [producers.acquire({"x": i}, 60) for i in range(3)]
    producers.close_all()
    assert [e.producer.closed_with for e in entries] == [[None]] * 3
    assert len(producers) == 0


class ReaperClock(ManualClock):
    """``now_s`` for the test's own thread; the reaper thread, instead, waits at each read
    until the test answers it, so the test decides when the reaper looks, and at what time.
    """

    def __init__(self) -> None:
        super().__init__()
        self._test_thread = threading.current_thread()
        self._reads: queue.Queue[threading.Thread] = queue.Queue()
        self._answers: queue.Queue[float] = queue.Queue()

    def __call__(self) -> float:
        if threading.current_thread() is self._test_thread:
            return self.now_s
        self._reads.put(threading.current_thread())
        return self._answers.get(timeout=10)  # a safety net only

    def await_read(self) -> threading.Thread:
        """Wait until the reaper reads the clock; returns the reaper's thread."""
        try:
            return self._reads.get(timeout=10)  # a safety net only
        except queue.Empty:
            raise AssertionError("the reaper did not read the clock") from None

    def answer(self, now_s: float) -> None:
        self._answers.put(now_s)


def test_the_reaper_thread_closes_an_idle_producer() -> None:
    clock = ReaperClock()
    producers = ProducerCache(FakeProducer, monotonic=clock)
    entry = producers.acquire({"x": 1}, 60)  # the first producer starts the reaper
    reaper = clock.await_read()
    producers.release(entry)  # unused from 1000 s on
    clock.answer(1059.999)  # not idle for 60 s yet...
    assert clock.await_read() is reaper  # ...so it waited the 1 ms left, and looks again
    assert entry.producer.closed_with == []
    assert len(producers) == 1
    clock.answer(1060)
    assert entry.producer.closed.wait(10), "the idle producer was not closed"  # a safety net
    assert entry.producer.closed_with == [None]  # a normal close: delivers what is left
    reaper.join(10)
    assert not reaper.is_alive()  # nothing left to watch: the reaper ends
    assert len(producers) == 0


def test_rows_go_to_send_batch_in_calls_of_ten_thousand(monkeypatch: pytest.MonkeyPatch) -> None:
    producer = BatchSends()
    results: list[Any] = []
    batching = _BatchingSend(producer, results)
    monkeypatch.setattr(_BatchingSend, "ROWS_PER_CALL", 3)
    rows = [Row(key=f"k{i}", value=b"v%d" % i) for i in range(7)]
    assert KafkaSink("t", **BOOTSTRAP).send_rows(batching, rows, on_delivery) == 7
    batching.close()
    assert [len(call[1]) for call in producer.calls] == [3, 3, 1]
    assert producer.calls[0] == (
        "t",
        [b"v0", b"v1", b"v2"],
        [b"k0", b"k1", b"k2"],
        None,
        None,
        None,
    )
    assert results == ["result"] * 3
