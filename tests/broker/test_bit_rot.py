"""Bit rot at rest: a cleanly closed log whose active segment was damaged while the broker
was down is cut at the first batch whose CRC fails, never served, and the cut is logged."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from kclient.protocol import ApiKey
from kclient.record import iter_batches
from kclient.record.layout import HEADER
from tests.broker.conftest import ApiHarness, batch


def write_ten_batches(tmp_path: Path, make_harness: Any) -> tuple[Path, list[tuple[int, int]]]:
    """Ten one-record batches in t-0, the broker closed cleanly; (segment, [(position,
    size)] of each batch)."""
    h = make_harness(log_dir=str(tmp_path))
    h.controller.create_topic("t", 1)
    for i in range(10):
        assert h.produce("t", batch([b"value-%d" % i]))["base_offset"] == i
    h.close()
    (segment,) = (tmp_path / "t-0").glob("*.log")
    data = segment.read_bytes()
    places, position = [], 0
    while position < len(data):
        size = 12 + HEADER.unpack_from(data, position)[1]
        places.append((position, size))
        position += size
    assert len(places) == 10
    return segment, places


def fetch_all(h: ApiHarness) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record a consumer gets from offset 0, every CRC checked."""
    body = h.call(ApiKey.FETCH, 12, h.fetch_body("t", 0))
    data = body["responses"][0]["partitions"][0]["records"]
    return [(r.offset, r.value) for b in iter_batches(data, validate_crc=True) for r in b.records()]


@pytest.mark.parametrize(
    ("damage", "kept"),
    [("bit in batch 5", 5), ("8 bytes of the last batch", 9)],
)
def test_a_batch_damaged_at_rest_is_dropped_with_everything_after_it(
    tmp_path: Path, make_harness: Any, caplog: pytest.LogCaptureFixture, damage: str, kept: int
) -> None:
    segment, places = write_ten_batches(tmp_path, make_harness)
    data = bytearray(segment.read_bytes())
    position, size = places[kept]
    if damage.startswith("bit"):
        data[position + size - 3] ^= 0x10  # inside the record's value
    else:
        data[position + size - 8 :] = b"\xee" * 8
    segment.write_bytes(bytes(data))

    with caplog.at_level(logging.WARNING, logger="kclient.broker"):
        h = make_harness(log_dir=str(tmp_path))
    assert fetch_all(h) == [(i, b"value-%d" % i) for i in range(kept)]
    assert h.controller.partition("t", 0).log.high_watermark == kept
    dropped = [r.getMessage() for r in caplog.records if "dropping" in r.getMessage()]
    assert len(dropped) == 1
    assert "t-0" in dropped[0] and f"offsets {kept}..9" in dropped[0]
    assert f"{sum(s for _, s in places[kept:])} bytes" in dropped[0]
    assert "CRC" in " ".join(r.getMessage() for r in caplog.records)

    # new writes continue where the served log ends, and survive the next restart
    assert h.produce("t", batch([b"after"]))["base_offset"] == kept
    h.close()
    again = make_harness(log_dir=str(tmp_path))
    assert fetch_all(again)[-1] == (kept, b"after")


def test_an_undamaged_log_reopens_without_dropping_anything(
    tmp_path: Path, make_harness: Any, caplog: pytest.LogCaptureFixture
) -> None:
    write_ten_batches(tmp_path, make_harness)
    with caplog.at_level(logging.WARNING, logger="kclient.broker"):
        h = make_harness(log_dir=str(tmp_path))
    assert [o for o, _ in fetch_all(h)] == list(range(10))
    assert not caplog.records
