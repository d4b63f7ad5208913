"""``send_batch`` with Arrow columns: the bytes on the wire are those of one ``send`` per
record, whichever way the columns are read — in place by the C accelerator ("c") or as
Python lists ("python", the pure-Python fallback, forced here by patching
``kclient.sender.columns``) — and bad Arrow columns are refused naming the argument."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from kclient.producer import KafkaProducer
from kclient.record import _accel
from kclient.sender import append_rows, columns
from kclient.sender.partitioner import keyed_partition
from tests.test_producer import LiveMockClient

pa = pytest.importorskip("pyarrow")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(params=["c", "python"])
def reader(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which column reader ``send_batch`` uses: in place (C) or the Python lists."""
    if request.param == "c" and not _accel.ACCELERATED:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON is set)")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "python":
            patch.setattr(columns, "BinaryColumn", None)
            patch.setattr(columns, "keyed_partitions", columns._keyed_partitions_python)
            patch.setattr(append_rows, "group_rows", columns._group_rows_python)
        yield request.param


class WireClient(LiveMockClient):
    """Keeps the records section of every produce request, per partition, in order."""

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self.wire: dict[int, list[bytes]] = {}

    def answer(self, request: Any) -> dict[str, Any]:
        for topic in request.body_for(12)["topic_data"]:
            for part in topic["partition_data"]:
                self.wire.setdefault(part["index"], []).append(bytes(part["records"]))
        return super().answer(request)


def wire_of(send: Any, codec: str, partitions: int) -> dict[int, list[bytes]]:
    """The produce requests' records per partition after ``send(producer)`` and a flush
    (linger long and batches large: one batch per partition, built at the flush)."""
    client = WireClient(partitions)
    with KafkaProducer(
        bootstrap_servers="127.0.0.1:9092",
        linger_ms=60_000,
        batch_size=1 << 20,
        compression_type=codec,
        kafka_client=client,
    ) as producer:
        result = send(producer)
        producer.flush(10)
        if result is not None:
            result.result(10)
    assert client.wire
    return client.wire


def one_by_one(values: list[Any], keys: list[Any] | None, stamps: list[int]) -> Any:
    def send(producer: KafkaProducer) -> None:
        for i, value in enumerate(values):
            producer.send("t", value, None if keys is None else keys[i], timestamp_ms=stamps[i])

    return send


VALUES = [None if i % 11 == 3 else (b"v%d-" % i) * (i % 7) for i in range(120)]
KEYS = [b"key-%d" % (i % 13) for i in range(120)]
STAMPS = [1_700_000_000_000 + (i * 37) % 500 for i in range(120)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("arrow_type", ["binary", "large_binary", "string", "large_string"])
def test_keyed_arrow_rows_go_on_the_wire_as_send_sends_them(
    reader: str, codec: str, arrow_type: str
) -> None:
    text = arrow_type.endswith("string")
    values = pa.array(
        [None if v is None else v.decode() if text else v for v in VALUES], arrow_type
    )
    keys = pa.array([k.decode() if text else k for k in KEYS], arrow_type)
    stamps = pa.array(STAMPS, pa.int64())
    bulk = wire_of(lambda p: p.send_batch("t", values, keys, timestamps=stamps), codec, 4)
    assert bulk == wire_of(one_by_one(VALUES, KEYS, STAMPS), codec, 4)
    assert set(bulk) == {keyed_partition(k, 4) for k in KEYS}  # murmur2 placed every row


@pytest.mark.parametrize("codec", CODECS)
def test_sliced_and_chunked_arrays_with_null_keys_go_as_their_rows(reader: str, codec: str) -> None:
    keys = [None if i % 5 == 0 else k for i, k in enumerate(KEYS)]
    whole_values = pa.array([b"x", *VALUES, b"y"], pa.large_binary())
    values = whole_values.slice(1, len(VALUES))  # offset 1 into its buffers
    key_chunks = pa.chunked_array([pa.array(keys[:50]), pa.array(keys[50:]).slice(0)])
    stamps = pa.array([dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc) for t in STAMPS])
    assert str(stamps.type).startswith("timestamp[us")  # read as ms since the epoch
    bulk = wire_of(lambda p: p.send_batch("t", values, key_chunks, timestamps=stamps), codec, 1)
    assert bulk == wire_of(one_by_one(VALUES, keys, STAMPS), codec, 1)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_keyless_arrow_rows_go_as_send_sends_them(reader: str, codec: str) -> None:
    values = pa.array(VALUES, pa.binary())
    stamps = pa.array(STAMPS, pa.int64())
    bulk = wire_of(lambda p: p.send_batch("t", values, timestamps=stamps), codec, 1)
    assert bulk == wire_of(one_by_one(VALUES, None, STAMPS), codec, 1)


def test_an_arrow_partition_column_places_rows_and_nulls_go_by_key(reader: str) -> None:
    client = LiveMockClient(partitions=4)
    with KafkaProducer(
        bootstrap_servers="127.0.0.1:9092", linger_ms=0, kafka_client=client
    ) as producer:
        result = producer.send_batch(
            "t",
            pa.array([b"a", b"b", b"c"]),
            pa.array([b"k", b"k", b"k"]),
            partitions=pa.array([3, None, 1], pa.int32()),
        )
        placed = [md.partition for md in result.result(10)]
    assert placed == [3, keyed_partition(b"k", 4), 1]


def test_a_negative_arrow_partition_fails_its_row_only(reader: str) -> None:
    client = LiveMockClient(partitions=4)
    with KafkaProducer(
        bootstrap_servers="127.0.0.1:9092", linger_ms=0, kafka_client=client
    ) as producer:
        result = producer.send_batch(
            "t", pa.array([b"a", b"b"]), partitions=pa.array([-1, 2], pa.int64())
        )
        errors = result.exceptions(10)
    assert list(errors) == [0] and isinstance(errors[0], ValueError)
    assert [r.value for r in client.records[("t", 2)]] == [b"b"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"values": "int64"}, TypeError, "'values' is an Arrow array of int64; give binary"),
        ({"keys": "int32"}, TypeError, "'keys' is an Arrow array of int32; give binary"),
        ({"keys": "short"}, ValueError, "'keys' has 1 items but 'values' has 2"),
        ({"timestamps": "double"}, TypeError, "'timestamps' is an Arrow array of double"),
        ({"partitions": "string"}, TypeError, "'partitions' is an Arrow array of string"),
        ({"partitions": "short"}, ValueError, "'partitions' has 1 items but 'values' has 2"),
    ],
)
def test_bad_arrow_columns_are_refused_naming_the_argument(
    reader: str, kwargs: dict[str, str], error: type[Exception], match: str
) -> None:
    def column(kind: str) -> Any:
        if kind == "short":
            return pa.array([1], pa.int64()) if "partitions" in kwargs else pa.array([b"k"])
        return pa.array(["1", "2"] if kind == "string" else [1, 2], kind)

    args: dict[str, Any] = {"values": pa.array([b"a", b"b"])}
    args.update({name: column(kind) for name, kind in kwargs.items()})
    with (
        KafkaProducer(bootstrap_servers="127.0.0.1:9092", kafka_client=LiveMockClient()) as p,
        pytest.raises(error, match=match),
    ):
        p.send_batch("t", **args)


class ForeignArray:
    """An array of another Arrow library: it only exports the Arrow C data interface."""

    def __init__(self, array: Any, stream: bool) -> None:
        self._array = pa.chunked_array([array]) if stream else array
        name = "__arrow_c_stream__" if stream else "__arrow_c_array__"
        setattr(self, name, getattr(self._array, name))


@pytest.mark.parametrize("stream", [False, True])
def test_arrays_of_other_arrow_libraries_go_as_pyarrow_ones(reader: str, stream: bool) -> None:
    values = ForeignArray(pa.array(VALUES, pa.binary()), stream)
    keys = ForeignArray(pa.array(KEYS, pa.string()), stream)
    stamps = ForeignArray(pa.array(STAMPS, pa.int64()), stream)
    bulk = wire_of(lambda p: p.send_batch("t", values, keys, timestamps=stamps), "none", 4)
    assert bulk == wire_of(one_by_one(VALUES, KEYS, STAMPS), "none", 4)
