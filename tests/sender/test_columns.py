"""``kclient.sender.columns``: Arrow columns read in place, and whole-column partitioning
in C agreeing with the Python fallback row for row."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.record import _accel
from kclient.sender import columns
from kclient.sender.partitioner import keyed_partition

pa = pytest.importorskip("pyarrow")
needs_c = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="the C accelerator is not built (or KCLIENT_PURE_PYTHON)"
)


@needs_c
@pytest.mark.parametrize("arrow_type", ["binary", "large_binary", "string", "large_string"])
def test_a_binary_column_reads_an_arrow_slice_row_by_row(arrow_type: str) -> None:
    items = [b"ab", None, b"", b"xyz", None, b"q" * 300]
    text = arrow_type.endswith("string")
    whole = pa.array(
        [None if v is None else v.decode() if text else v for v in items * 3], arrow_type
    )
    sliced = whole.slice(4, 9)
    col = columns.bytes_column("values", sliced, 9)
    assert type(col).__name__ == "BinaryColumn"
    assert [col[i] for i in range(len(col))] == (items * 3)[4:13]
    assert (col.max_size, col.null_count) == (300, 3)


@needs_c
@pytest.mark.parametrize(
    ("offsets", "data", "match"),
    [
        (array("i", [0, 2]), b"ab", "offsets buffer holds 8 bytes, 2 rows from offset 0 need 12"),
        (array("i", [0, 2, 1]), b"ab", "row 1 has offsets 2..1 outside its data buffer"),
        (array("i", [0, 2, 9]), b"ab", "row 1 has offsets 2..9 outside its data buffer of 2"),
    ],
)
def test_a_binary_column_refuses_buffers_that_do_not_hold_its_rows(
    offsets: array[int], data: bytes, match: str
) -> None:
    from kclient.record._speedups import BinaryColumn

    with pytest.raises(ValueError, match=match):
        BinaryColumn(None, offsets, data, 0, 2, False)


keys_st = st.lists(st.none() | st.binary(max_size=20), min_size=1, max_size=60)


@needs_c
@settings(max_examples=60, deadline=None)
@given(keys=keys_st, count=st.integers(1, 9), data=st.data())
def test_c_partitioning_and_grouping_agree_with_python(
    keys: list[Any], count: int, data: Any
) -> None:
    from kclient.sender import _murmur2

    n = len(keys)
    explicit = data.draw(
        st.none() | st.lists(st.none() | st.integers(-2, count), min_size=n, max_size=n)
    )
    arrow_keys = columns.bytes_column("keys", pa.array(keys, pa.binary()), n)
    for keys_arg in (keys, arrow_keys):
        c_out, py_out = array("q", [-5]) * n, array("q", [-5]) * n
        c_end = _murmur2.keyed_partitions(keys_arg, explicit, count, 0, n, c_out)
        py_end = columns._keyed_partitions_python(keys, explicit, count, 0, n, py_out)
        assert (c_end, c_out) == (py_end, py_out)
    for row in range(c_end):
        chosen = None if explicit is None else explicit[row]
        want = (
            chosen
            if chosen is not None
            else -1
            if keys[row] is None
            else keyed_partition(keys[row], count)
        )
        assert c_out[row] == want
    parts = array("q", [p if p >= 0 else -1 for p in c_out[:c_end]])
    c_order, py_order = array("q", [0]) * c_end, array("q", [0]) * c_end
    groups = _murmur2.group_rows(parts, 0, c_end, c_order)
    assert groups == columns._group_rows_python(parts, 0, c_end, py_order)
    assert c_order == py_order
    for partition, first, last in groups:
        assert list(c_order[first:last]) == [r for r in range(c_end) if parts[r] == partition]
