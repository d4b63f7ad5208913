"""The OTLP MetricsData writer and reader (kclient.protocol.otlp): golden bytes, round trips,
and malformed input raising only ProtocolDecodeError."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolDecodeError
from kclient.protocol.otlp import (
    CUMULATIVE,
    DELTA,
    DataPoint,
    Metric,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
    decode_metrics_data,
    encode_metrics_data,
)


def one_gauge(value: int | float) -> MetricsData:
    point = DataPoint(value, time_unix_nano=2, attributes=(("node_id", "1"),))
    metric = Metric("a", (point,))
    return MetricsData((ResourceMetrics((ScopeMetrics((metric,)),)),))


def test_golden_bytes_of_one_int_gauge() -> None:
    # Worked out by hand from the .proto field numbers.
    key_value = b"\x0a\x07node_id" + b"\x12\x03" + b"\x0a\x011"  # key=1, value=2{string=1}
    point = (
        b"\x19"
        + (2).to_bytes(8, "little")  # time_unix_nano = 3, fixed64
        + b"\x31"
        + (7).to_bytes(8, "little")  # as_int = 6, sfixed64
        + b"\x3a"
        + bytes([len(key_value)])
        + key_value  # attributes = 7
    )
    gauge = b"\x0a" + bytes([len(point)]) + point  # data_points = 1
    metric = b"\x0a\x01a" + b"\x2a" + bytes([len(gauge)]) + gauge  # name = 1, gauge = 5
    scope_metrics = b"\x0a\x00" + b"\x12" + bytes([len(metric)]) + metric  # scope = 1, metrics = 2
    resource_metrics = b"\x0a\x00" + b"\x12" + bytes([len(scope_metrics)]) + scope_metrics
    expected = b"\x0a" + bytes([len(resource_metrics)]) + resource_metrics
    assert encode_metrics_data(one_gauge(7)) == expected
    assert decode_metrics_data(expected) == one_gauge(7)


def test_sum_keeps_temporality_and_monotonicity() -> None:
    for temporality in (DELTA, CUMULATIVE):
        metric = Metric(
            "org.apache.kafka.producer.record.send.total",
            (DataPoint(12.5, 20, 10),),
            sum=True,
            temporality=temporality,
            monotonic=True,
        )
        data = MetricsData((ResourceMetrics((ScopeMetrics((metric,), "kclient", "1"),)),))
        decoded = decode_metrics_data(encode_metrics_data(data))
        assert decoded == data
        assert decoded.metric_names() == ["org.apache.kafka.producer.record.send.total"]


def test_unknown_fields_are_skipped() -> None:
    data = encode_metrics_data(one_gauge(1.5))
    # a fixed32 field 15, a varint field 14 and a bytes field 13 before the real content
    extra = b"\x7d\x00\x00\x00\x00" + b"\x70\x05" + b"\x6a\x02hi"
    assert decode_metrics_data(extra + data) == one_gauge(1.5)


_attr_value = st.one_of(
    st.text(max_size=6),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.binary(max_size=6),
)
_attrs = st.lists(st.tuples(st.text(max_size=6), _attr_value), max_size=3).map(tuple)
_points = st.builds(
    DataPoint,
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False)),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    _attrs,
)
_metrics = st.builds(
    Metric,
    st.text(max_size=12),
    st.lists(_points, max_size=3).map(tuple),
    st.booleans(),
    st.integers(0, 2),
    st.booleans(),
    st.text(max_size=4),
    st.text(max_size=4),
).map(lambda m: m if m.sum else Metric(m.name, m.points, description=m.description, unit=m.unit))
_data = st.builds(
    MetricsData,
    st.lists(
        st.builds(
            ResourceMetrics,
            st.lists(
                st.builds(
                    ScopeMetrics,
                    st.lists(_metrics, max_size=3).map(tuple),
                    st.text(max_size=4),
                    st.text(max_size=4),
                ),
                max_size=2,
            ).map(tuple),
            _attrs,
        ),
        max_size=2,
    ).map(tuple),
)


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(data=_data)
def test_round_trip(data: MetricsData) -> None:
    encoded = encode_metrics_data(data)
    decoded = decode_metrics_data(encoded)
    assert decoded == data
    assert encode_metrics_data(decoded) == encoded


def test_negative_zero_and_infinities_survive() -> None:
    for value in (-0.0, math.inf, -math.inf):
        decoded = decode_metrics_data(encode_metrics_data(one_gauge(value)))
        got = decoded.metrics()[0].points[0].value
        assert got == value and math.copysign(1, got) == math.copysign(1, value)


@pytest.mark.parametrize("seed", range(8))
def test_malformed_bytes_raise_only_protocol_decode_error(seed: int) -> None:
    rng = random.Random(seed)
    valid = encode_metrics_data(one_gauge(3))
    for _ in range(300):
        data = bytearray(valid)
        at = rng.randrange(len(data))
        choice = rng.randrange(3)
        if choice == 0:
            del data[at:]
        elif choice == 1:
            data[at] = rng.randrange(256)
        else:
            data[at:] = rng.randbytes(rng.randint(0, 24))
        try:
            decode_metrics_data(bytes(data))
        except ProtocolDecodeError:
            pass
