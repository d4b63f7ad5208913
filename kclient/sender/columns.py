"""``send_batch``'s columns: Arrow arrays read in place, and partitioning whole columns.

No Java counterpart (Java sends record by record). ``bytes_column`` turns a ``values`` or
``keys`` argument into what the bulk path reads: a list of bytes/None, or — for an Arrow
binary or string array (large variants, slices, chunked arrays; pyarrow's, or any
library's through the Arrow C data interface) when the C accelerator is built — a
``BinaryColumn`` that reads the array's validity bitmap, offsets and data buffers in place
(no Python object per row). ``int_column`` turns an Arrow integer or timestamp
column (``partitions``, ``timestamps``) into an ``array('q')``, nulls filled. pyarrow is
imported only for an Arrow array (pyarrow's own are recognised by their methods), so it
stays optional.

``keyed_partitions`` and ``group_rows`` partition and group a call's rows: in C
(``kclient.sender._murmur2``) when the accelerator is built, else in Python with the same
results. Pure functions: any thread (the caller's, in ``send_batch``).
"""

from __future__ import annotations

from array import array
from collections.abc import MutableSequence, Sequence
from typing import Any

from kclient.record import ACCELERATED
from kclient.sender.partitioner import keyed_partition

BinaryColumn: Any = None
if ACCELERATED:
    from kclient.record._speedups import BinaryColumn

#: Arrow types read as bytes: (type name, 64-bit offsets); strings are their UTF-8 bytes
_ARROW_BINARY = {
    "binary": False,
    "string": False,
    "large_binary": True,
    "large_string": True,
}
_ARROW_VIEWS = frozenset({"binary_view", "string_view"})


def _arrow_array(name: str, values: Any) -> Any:
    """An Arrow ``ChunkedArray`` as one ``Array`` (chunks combined), an ``Array`` as is."""
    if hasattr(values, "num_chunks"):
        if values.num_chunks == 1:
            return values.chunk(0)
        try:
            return values.combine_chunks()
        except Exception as exc:  # an Arrow type that cannot be combined
            raise TypeError(f"send_batch: {name!r}: cannot read the Arrow column ({exc})") from exc
    return values


def is_arrow(values: object) -> bool:
    """Whether ``values`` is a pyarrow ``Array`` or ``ChunkedArray`` (by its methods)."""
    return hasattr(values, "to_pylist") and hasattr(values, "type")


def from_arrow_interface(name: str, values: object) -> object:
    """An object of another Arrow library exporting the Arrow C data interface
    (``__arrow_c_array__``, or ``__arrow_c_stream__`` for a chunked one) as a pyarrow
    array, its buffers shared, not copied; anything else as it is."""
    if is_arrow(values):
        return values
    kind = (
        "array"
        if hasattr(values, "__arrow_c_array__")
        else "stream"
        if hasattr(values, "__arrow_c_stream__")
        else None
    )
    if kind is None:
        return values
    try:
        import pyarrow
    except ImportError:
        raise TypeError(
            f"send_batch: {name!r} is an Arrow array of {type(values).__name__}: reading it "
            "needs pyarrow (pip install pyarrow)"
        ) from None
    return pyarrow.array(values) if kind == "array" else pyarrow.chunked_array(values)


def bytes_column(name: str, values: object, rows: int | None) -> Any:
    """A ``values``/``keys`` argument as a ``BinaryColumn`` (an Arrow binary or string
    array, accelerator built) or a list; ``rows`` items (any number when None). Raises
    ``TypeError`` for an Arrow array of another type, ``ValueError`` for a wrong length."""
    if values is None:
        return None
    values = from_arrow_interface(name, values)
    if not is_arrow(values):
        return sequence(name, values, rows)
    array_ = _arrow_array(name, values)
    type_name = str(array_.type)
    wide = _ARROW_BINARY.get(type_name)
    if wide is None and type_name not in _ARROW_VIEWS:
        raise TypeError(
            f"send_batch: {name!r} is an Arrow array of {type_name}; give binary or string "
            "(or large_binary, large_string): cast it first, e.g. with .cast(pyarrow.binary())"
        )
    _check_rows(name, len(array_), rows)
    if wide is not None and BinaryColumn is not None:
        validity, offsets, data = array_.buffers()[:3]
        if not array_.null_count:
            validity = None  # a bitmap may be there with every bit set, or absent
        if offsets is None and not len(array_):
            return []
        try:
            return BinaryColumn(validity, offsets, data, array_.offset, len(array_), wide)
        except (ValueError, TypeError) as exc:  # buffers that do not hold the rows
            raise type(exc)(f"send_batch: {name!r}: {exc}") from None
    items: list[Any] = array_.to_pylist()
    if type_name in ("string", "large_string", "string_view"):  # as UTF-8 bytes
        items = [None if v is None else v.encode() for v in items]
    return items


def int_column(name: str, values: object, rows: int, fill: int) -> Any:
    """A ``partitions``/``timestamps`` argument: an Arrow integer or timestamp column as an
    ``array('q')`` (nulls as ``fill``; timestamps as ms since the epoch), anything else as
    a list of ``rows`` items (checked per row later). A negative ``fill`` (partitions:
    -1, none) keeps a column holding negative numbers a list, so that their rows are
    refused rather than taken as null."""
    if values is None:
        return None
    values = from_arrow_interface(name, values)
    if not is_arrow(values):
        return sequence(name, values, rows)
    array_ = _arrow_array(name, values)
    _check_rows(name, len(array_), rows)
    type_name = str(array_.type)
    if type_name.startswith("timestamp["):
        if getattr(array_.type, "unit", "ms") != "ms":
            array_ = array_.cast(_pyarrow().timestamp("ms", array_.type.tz), safe=False)
        array_ = array_.cast(_pyarrow().int64())
    elif type_name in ("int8", "int16", "int32", "uint8", "uint16", "uint32"):
        array_ = array_.cast(_pyarrow().int64())
    elif type_name != "int64":
        raise TypeError(
            f"send_batch: {name!r} is an Arrow array of {type_name}; give int64 (or int8 to "
            "int32, uint8 to uint32" + (", or timestamps)" if name == "timestamps" else ")")
        )
    if fill < 0 and len(array_) > array_.null_count:
        lowest = _pyarrow().compute.min(array_).as_py()
        if lowest is not None and lowest < 0:  # a negative partition: send refuses its row
            return array_.to_pylist()
    out = array("q")
    if array_.null_count:
        array_ = array_.fill_null(fill)
    data = array_.buffers()[1]
    if data is not None and len(array_):
        start = array_.offset * 8
        out.frombytes(memoryview(data)[start : start + len(array_) * 8])
    return out


def _pyarrow() -> Any:
    """pyarrow, imported only for an Arrow array (so it is installed)."""
    import pyarrow
    import pyarrow.compute

    return pyarrow


def sequence(name: str, values: object, rows: int | None) -> list[Any]:
    """A sequence argument as a list of ``rows`` items (any number when None)."""
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Sequence):
        raise TypeError(
            f"send_batch: {name!r} must be a sequence (list, tuple) or an Arrow array with one "
            f"item per record, got {type(values).__name__}"
        )
    items = values if values.__class__ is list else list(values)  # the bulk path reads lists
    _check_rows(name, len(items), rows)
    return items


def _check_rows(name: str, got: int, rows: int | None) -> None:
    if rows is not None and got != rows:
        raise ValueError(
            f"send_batch: {name!r} has {got} items but 'values' has {rows}; give one per record"
        )


# ---- partitioning whole columns ------------------------------------------------------------


def _keyed_partitions_python(  # noqa: PLR0917 (the C function's positional signature)
    keys: Sequence[bytes | None] | None,
    explicit: Sequence[Any] | None,
    num_partitions: int,
    start: int,
    stop: int,
    out: MutableSequence[int],
) -> int:
    """For rows ``start``..``stop - 1``: ``out[row]`` = the explicit partition (an
    ``array('q')``'s -1 or a list's None: none), else the key's, else -1. Returns the first
    row whose explicit partition is not an int in range (``stop``: none)."""
    ints = isinstance(explicit, array)
    for row in range(start, stop):
        if explicit is not None:
            chosen = explicit[row]
            if chosen is not None and not (ints and chosen == -1):
                if chosen.__class__ is not int or not 0 <= chosen < num_partitions:
                    return row
                out[row] = chosen
                continue
        key = None if keys is None else keys[row]
        out[row] = -1 if key is None else keyed_partition(key, num_partitions)
    return stop


def _group_rows_python(
    partitions: Sequence[int], start: int, stop: int, order: MutableSequence[int]
) -> list[tuple[int, int, int]]:
    """The rows ``start``..``stop - 1`` by partition: ``order[first:last]`` holds each
    group's rows in row order; ``(partition, first, last)`` per group, by partition."""
    by_partition: dict[int, list[int]] = {}
    for row in range(start, stop):
        by_partition.setdefault(partitions[row], []).append(row)
    groups = []
    at = 0
    for partition in sorted(by_partition):
        rows = by_partition[partition]
        order[at : at + len(rows)] = array("q", rows)
        groups.append((partition, at, at + len(rows)))
        at += len(rows)
    return groups


keyed_partitions = _keyed_partitions_python
group_rows = _group_rows_python
if ACCELERATED:
    try:
        from kclient.sender._murmur2 import group_rows as _group_rows_c
        from kclient.sender._murmur2 import keyed_partitions as _keyed_partitions_c
    except ImportError:  # built before these existed: the Python ones
        pass
    else:
        keyed_partitions = _keyed_partitions_c  # type: ignore[assignment]
        group_rows = _group_rows_c  # type: ignore[assignment]
