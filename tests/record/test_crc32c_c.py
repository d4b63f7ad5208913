"""The accelerator's CRC-32C (``kclient/record/_crc32c.c``, which ``_close_framed`` uses
instead of calling the crc32c package) against the crc32c package itself."""

from __future__ import annotations

import crc32c as package
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kclient.record import _accel

pytestmark = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="the C accelerator is not built (or KCLIENT_PURE_PYTHON)"
)


@given(st.binary(max_size=600))
def test_the_c_crc32c_is_the_packages(data: bytes) -> None:
    from kclient.record._speedups import crc32c

    assert crc32c(data) == package.crc32c(data) == crc32c(data, True)  # True: the table's


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 15, 16, 17, 100, 4096, 100_003])
def test_every_length_and_alignment(size: int) -> None:
    from kclient.record._speedups import crc32c

    data = bytes((i * 131 + 7) % 256 for i in range(size + 3))
    for start in range(3):  # unaligned starts
        piece = data[start : start + size]
        assert crc32c(piece) == package.crc32c(piece) == crc32c(piece, True)
