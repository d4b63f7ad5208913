"""OTLP metrics as protobuf bytes: the payload of a KIP-714 PushTelemetry request.

A small writer and reader for ``opentelemetry.proto.metrics.v1.MetricsData`` — just the
parts KIP-714 uses: ``ResourceMetrics`` → ``ScopeMetrics`` → ``Metric`` holding a
``Gauge`` or a ``Sum`` of ``NumberDataPoint``\\ s, attributes as ``KeyValue``/``AnyValue``.
Field numbers are those of the OpenTelemetry ``.proto`` files (metrics/v1, common/v1,
resource/v1). Sans-I/O and stateless; any thread. The reader skips fields it does not know
(histograms, exemplars, ...) and raises :class:`ProtocolDecodeError` on malformed bytes.

Protobuf wire format, as used here::

    tag     = varint(field_number << 3 | wire_type)
    wire 0  varint            (int64, bool, enum)
    wire 1  8 bytes, little-endian (fixed64, sfixed64, double)
    wire 2  varint length + bytes (string, bytes, embedded message)
    wire 5  4 bytes, little-endian (fixed32; skipped when read)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kclient.errors import ProtocolDecodeError
from kclient.protocol.types import write_uvarint
from kclient.varint import VarintError, read_uvarint

__all__ = [
    "CUMULATIVE",
    "DELTA",
    "AttributeValue",
    "DataPoint",
    "Metric",
    "MetricsData",
    "ResourceMetrics",
    "ScopeMetrics",
    "decode_metrics_data",
    "encode_metrics_data",
]

#: ``AggregationTemporality`` values (metrics.proto).
DELTA = 1
CUMULATIVE = 2

AttributeValue = str | bool | int | float | bytes
"""What an attribute (``AnyValue``) may hold here: its scalar kinds."""

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_SFIXED64 = struct.Struct("<q")

# ---- field numbers (opentelemetry/proto/*/v1/*.proto) ----------------------------------------
_METRICS_DATA_RESOURCE_METRICS = 1
_RESOURCE_METRICS_RESOURCE = 1
_RESOURCE_METRICS_SCOPE_METRICS = 2
_RESOURCE_ATTRIBUTES = 1
_SCOPE_METRICS_SCOPE = 1
_SCOPE_METRICS_METRICS = 2
_SCOPE_NAME = 1
_SCOPE_VERSION = 2
_METRIC_NAME = 1
_METRIC_DESCRIPTION = 2
_METRIC_UNIT = 3
_METRIC_GAUGE = 5
_METRIC_SUM = 7
_GAUGE_DATA_POINTS = 1
_SUM_DATA_POINTS = 1
_SUM_TEMPORALITY = 2
_SUM_MONOTONIC = 3
_POINT_START_TIME = 2  # fixed64
_POINT_TIME = 3  # fixed64
_POINT_AS_DOUBLE = 4  # double
_POINT_AS_INT = 6  # sfixed64
_POINT_ATTRIBUTES = 7
_KEY_VALUE_KEY = 1
_KEY_VALUE_VALUE = 2
_ANY_STRING = 1
_ANY_BOOL = 2
_ANY_INT = 3
_ANY_DOUBLE = 4
_ANY_BYTES = 7

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


@dataclass(frozen=True, slots=True)
class DataPoint:
    """One ``NumberDataPoint``: a value (``as_int`` if an int, else ``as_double``) at
    ``time_unix_nano``, over the interval from ``start_time_unix_nano`` (0: unset)."""

    value: int | float
    time_unix_nano: int
    start_time_unix_nano: int = 0
    attributes: tuple[tuple[str, AttributeValue], ...] = ()


@dataclass(frozen=True, slots=True)
class Metric:
    """One ``Metric``: a ``Gauge`` (``sum=False``) or a ``Sum`` with its temporality
    (:data:`DELTA` or :data:`CUMULATIVE`) and monotonicity."""

    name: str
    points: tuple[DataPoint, ...]
    sum: bool = False
    temporality: int = 0
    monotonic: bool = False
    description: str = ""
    unit: str = ""


@dataclass(frozen=True, slots=True)
class ScopeMetrics:
    """The metrics of one instrumentation scope (its ``name`` and ``version``)."""

    metrics: tuple[Metric, ...]
    name: str = ""
    version: str = ""


@dataclass(frozen=True, slots=True)
class ResourceMetrics:
    """The metrics of one resource, named by its attributes."""

    scope_metrics: tuple[ScopeMetrics, ...]
    attributes: tuple[tuple[str, AttributeValue], ...] = ()


@dataclass(frozen=True, slots=True)
class MetricsData:
    """An OTLP ``MetricsData``: what one PushTelemetry request carries."""

    resource_metrics: tuple[ResourceMetrics, ...] = field(default=())

    def metrics(self) -> list[Metric]:
        """Every metric of every resource and scope, in order."""
        return [m for r in self.resource_metrics for s in r.scope_metrics for m in s.metrics]

    def metric_names(self) -> list[str]:
        """The names of :meth:`metrics`."""
        return [m.name for m in self.metrics()]


# ---- writer -----------------------------------------------------------------------------------


def _varint(value: int, out: bytearray) -> None:
    write_uvarint(out, value & 0xFFFFFFFFFFFFFFFF)  # negative int64 as ten bytes, as protobuf


def _tag(number: int, wire: int, out: bytearray) -> None:
    _varint(number << 3 | wire, out)


def _len_field(number: int, payload: bytes | bytearray, out: bytearray) -> None:
    _tag(number, _LEN, out)
    _varint(len(payload), out)
    out += payload


def _string(number: int, text: str, out: bytearray) -> None:
    if text:  # proto3: a default value is not written
        _len_field(number, text.encode(), out)


def _any_value(value: AttributeValue) -> bytearray:
    out = bytearray()
    if isinstance(value, bool):
        _tag(_ANY_BOOL, _VARINT, out)
        _varint(int(value), out)
    elif isinstance(value, int):
        _tag(_ANY_INT, _VARINT, out)
        _varint(value, out)
    elif isinstance(value, float):
        _tag(_ANY_DOUBLE, _I64, out)
        out += _DOUBLE.pack(value)
    elif isinstance(value, bytes):
        _len_field(_ANY_BYTES, value, out)
    else:
        _len_field(_ANY_STRING, value.encode(), out)
    return out


def _attributes(number: int, attrs: Sequence[tuple[str, AttributeValue]], out: bytearray) -> None:
    for key, value in attrs:
        kv = bytearray()
        _string(_KEY_VALUE_KEY, key, kv)
        _len_field(_KEY_VALUE_VALUE, _any_value(value), kv)
        _len_field(number, kv, out)


def _data_point(point: DataPoint) -> bytearray:
    out = bytearray()
    if point.start_time_unix_nano:
        _tag(_POINT_START_TIME, _I64, out)
        out += _FIXED64.pack(point.start_time_unix_nano)
    _tag(_POINT_TIME, _I64, out)
    out += _FIXED64.pack(point.time_unix_nano)
    value = point.value
    if isinstance(value, int) and not isinstance(value, bool):
        _tag(_POINT_AS_INT, _I64, out)
        out += _SFIXED64.pack(value)
    else:
        _tag(_POINT_AS_DOUBLE, _I64, out)
        out += _DOUBLE.pack(float(value))
    _attributes(_POINT_ATTRIBUTES, point.attributes, out)
    return out


def _metric(metric: Metric) -> bytearray:
    out = bytearray()
    _string(_METRIC_NAME, metric.name, out)
    _string(_METRIC_DESCRIPTION, metric.description, out)
    _string(_METRIC_UNIT, metric.unit, out)
    data = bytearray()
    for point in metric.points:
        _len_field(_SUM_DATA_POINTS if metric.sum else _GAUGE_DATA_POINTS, _data_point(point), data)
    if metric.sum:
        if metric.temporality:
            _tag(_SUM_TEMPORALITY, _VARINT, data)
            _varint(metric.temporality, data)
        if metric.monotonic:
            _tag(_SUM_MONOTONIC, _VARINT, data)
            _varint(1, data)
    _len_field(_METRIC_SUM if metric.sum else _METRIC_GAUGE, data, out)
    return out


def encode_metrics_data(data: MetricsData) -> bytes:
    """``data`` as ``MetricsData`` protobuf bytes."""
    out = bytearray()
    for resource_metrics in data.resource_metrics:
        rm = bytearray()
        resource = bytearray()
        _attributes(_RESOURCE_ATTRIBUTES, resource_metrics.attributes, resource)
        _len_field(_RESOURCE_METRICS_RESOURCE, resource, rm)
        for scope_metrics in resource_metrics.scope_metrics:
            sm = bytearray()
            scope = bytearray()
            _string(_SCOPE_NAME, scope_metrics.name, scope)
            _string(_SCOPE_VERSION, scope_metrics.version, scope)
            _len_field(_SCOPE_METRICS_SCOPE, scope, sm)
            for metric in scope_metrics.metrics:
                _len_field(_SCOPE_METRICS_METRICS, _metric(metric), sm)
            _len_field(_RESOURCE_METRICS_SCOPE_METRICS, sm, rm)
        _len_field(_METRICS_DATA_RESOURCE_METRICS, rm, out)
    return bytes(out)


# ---- reader -----------------------------------------------------------------------------------

_Value = int | memoryview


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos)
    except VarintError as exc:
        raise ProtocolDecodeError(f"OTLP metrics: {exc}") from exc


def _fields(buf: memoryview) -> Iterator[tuple[int, int, _Value]]:
    """(field number, wire type, value) of each field of one message: an int for varint
    and fixed fields (fixed64 unsigned), a memoryview for length-delimited ones."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtocolDecodeError(f"OTLP metrics: field number 0 at byte {pos}")
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
            yield number, wire, value
        elif wire == _I64:
            if pos + 8 > end:
                raise ProtocolDecodeError("OTLP metrics: a 64-bit field runs past the end")
            yield number, wire, _FIXED64.unpack_from(buf, pos)[0]
            pos += 8
        elif wire == _LEN:
            length, pos = _read_varint(buf, pos)
            if pos + length > end:
                raise ProtocolDecodeError(
                    f"OTLP metrics: a field of {length} bytes runs past the end at byte {pos}"
                )
            yield number, wire, buf[pos : pos + length]
            pos += length
        elif wire == _I32:
            if pos + 4 > end:
                raise ProtocolDecodeError("OTLP metrics: a 32-bit field runs past the end")
            pos += 4  # no fixed32 field is read here
        else:
            raise ProtocolDecodeError(f"OTLP metrics: unknown wire type {wire} at byte {pos}")


def _bytes(value: _Value, what: str) -> memoryview:
    if isinstance(value, int):
        raise ProtocolDecodeError(f"OTLP metrics: {what} is not length-delimited")
    return value


def _int(value: _Value, what: str) -> int:
    if not isinstance(value, int):
        raise ProtocolDecodeError(f"OTLP metrics: {what} is not a number")
    return value


def _text(value: _Value, what: str) -> str:
    try:
        return bytes(_bytes(value, what)).decode()
    except UnicodeDecodeError as exc:
        raise ProtocolDecodeError(f"OTLP metrics: {what} is not UTF-8") from exc


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _read_any(buf: memoryview) -> AttributeValue:
    result: AttributeValue = ""
    for number, wire, value in _fields(buf):
        if number == _ANY_STRING:
            result = _text(value, "a string attribute")
        elif number == _ANY_BOOL:
            result = bool(_int(value, "a bool attribute"))
        elif number == _ANY_INT:
            result = _signed64(_int(value, "an int attribute") & 0xFFFFFFFFFFFFFFFF)
        elif number == _ANY_DOUBLE and wire == _I64:
            result = _DOUBLE.unpack(_FIXED64.pack(_int(value, "a double attribute")))[0]
        elif number == _ANY_BYTES:
            result = bytes(_bytes(value, "a bytes attribute"))
    return result


def _read_key_value(buf: memoryview) -> tuple[str, AttributeValue]:
    key = ""
    result: AttributeValue = ""
    for number, _wire, value in _fields(buf):
        if number == _KEY_VALUE_KEY:
            key = _text(value, "an attribute key")
        elif number == _KEY_VALUE_VALUE:
            result = _read_any(_bytes(value, "an attribute value"))
    return key, result


def _read_point(buf: memoryview) -> DataPoint:
    start = time = 0
    result: int | float = 0
    attrs: list[tuple[str, AttributeValue]] = []
    for number, wire, value in _fields(buf):
        if number == _POINT_START_TIME and wire == _I64:
            start = _int(value, "start_time_unix_nano")
        elif number == _POINT_TIME and wire == _I64:
            time = _int(value, "time_unix_nano")
        elif number == _POINT_AS_DOUBLE and wire == _I64:
            result = _DOUBLE.unpack(_FIXED64.pack(_int(value, "as_double")))[0]
        elif number == _POINT_AS_INT and wire == _I64:
            result = _signed64(_int(value, "as_int"))
        elif number == _POINT_ATTRIBUTES:
            attrs.append(_read_key_value(_bytes(value, "a data point attribute")))
    return DataPoint(result, time, start, tuple(attrs))


def _read_metric(buf: memoryview) -> Metric:
    name = description = unit = ""
    points: list[DataPoint] = []
    is_sum = monotonic = False
    temporality = 0
    for number, _wire, value in _fields(buf):
        if number == _METRIC_NAME:
            name = _text(value, "a metric name")
        elif number == _METRIC_DESCRIPTION:
            description = _text(value, "a metric description")
        elif number == _METRIC_UNIT:
            unit = _text(value, "a metric unit")
        elif number in (_METRIC_GAUGE, _METRIC_SUM):
            is_sum = number == _METRIC_SUM
            for inner, _w, item in _fields(_bytes(value, "a gauge or sum")):
                if inner == _GAUGE_DATA_POINTS:  # == _SUM_DATA_POINTS
                    points.append(_read_point(_bytes(item, "a data point")))
                elif is_sum and inner == _SUM_TEMPORALITY:
                    temporality = _int(item, "aggregation_temporality")
                elif is_sum and inner == _SUM_MONOTONIC:
                    monotonic = bool(_int(item, "is_monotonic"))
    return Metric(name, tuple(points), is_sum, temporality, monotonic, description, unit)


def _read_scope_metrics(buf: memoryview) -> ScopeMetrics:
    name = version = ""
    metrics: list[Metric] = []
    for number, _wire, value in _fields(buf):
        if number == _SCOPE_METRICS_SCOPE:
            for inner, _w, item in _fields(_bytes(value, "a scope")):
                if inner == _SCOPE_NAME:
                    name = _text(item, "a scope name")
                elif inner == _SCOPE_VERSION:
                    version = _text(item, "a scope version")
        elif number == _SCOPE_METRICS_METRICS:
            metrics.append(_read_metric(_bytes(value, "a metric")))
    return ScopeMetrics(tuple(metrics), name, version)


def _read_resource_metrics(buf: memoryview) -> ResourceMetrics:
    attrs: list[tuple[str, AttributeValue]] = []
    scopes: list[ScopeMetrics] = []
    for number, _wire, value in _fields(buf):
        if number == _RESOURCE_METRICS_RESOURCE:
            for inner, _w, item in _fields(_bytes(value, "a resource")):
                if inner == _RESOURCE_ATTRIBUTES:
                    attrs.append(_read_key_value(_bytes(item, "a resource attribute")))
        elif number == _RESOURCE_METRICS_SCOPE_METRICS:
            scopes.append(_read_scope_metrics(_bytes(value, "scope metrics")))
    return ResourceMetrics(tuple(scopes), tuple(attrs))


def decode_metrics_data(data: bytes | bytearray | memoryview) -> MetricsData:
    """Read ``MetricsData`` protobuf bytes (unknown fields are skipped)."""
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    return MetricsData(
        tuple(
            _read_resource_metrics(_bytes(value, "resource metrics"))
            for number, _wire, value in _fields(buf)
            if number == _METRICS_DATA_RESOURCE_METRICS
        )
    )
