"""Golden batches written by another client (kafka-python 3.0.12), one per codec, pinned.

They were captured once and must keep decoding to the same records with the same CRC,
whatever versions of the codec libraries are installed. kafka-python writes
partitionLeaderEpoch 0, and its lz4 frames carry a content size (Java's do not).
"""

from __future__ import annotations

import pytest

from kclient.record import CompressionType, Record, iter_batches

TS = 1_600_000_000_000
RECORDS = [
    Record(0, TS, b"user-1", b"hello hello hello hello hello", [("trace", b"t1")]),
    Record(1, TS + 7, None, b"hello hello hello hello world", []),
    Record(2, TS + 3, b"user-3", None, [("a", None), ("b", b"")]),
]
HEADER = "0000000000000000{length}0000000002{crc}000{codec}0000000200000174876e8000"
HEADER += "00000174876e800700000000000004d2000500000064" + "00000003"

GOLDEN = {
    CompressionType.NONE: (
        0x240B5DC5,
        "0000009b",
        "640000000c757365722d313a68656c6c6f2068656c6c6f2068656c6c6f2068656c6c6f2068656c6c"
        "6f020a747261636504743146000e02013a68656c6c6f2068656c6c6f2068656c6c6f2068656c6c6f"
        "20776f726c6400240006040c757365722d330104026101026200",
    ),
    CompressionType.GZIP: (
        0x2D65B6A0,
        "0000007f",
        "1f8b0800f73b026b02ff4b616060e0292d4e2dd235b4ca48cdc9c957c041327195142526a7b29418"
        "ba31f03131e2545c9e5f9493c2a0c2c0c60231d69891852991912989010060d776ea6a000000",
    ),
    CompressionType.SNAPPY: (
        0xFF7B2CE0,
        "00000089",
        "82534e41505059000000000100000001000000446a44640000000c757365722d313a68656c6c6f20"
        "5a060038020a747261636504743146000e0201622d0060776f726c6400240006040c757365722d33"
        "0104026101026200",
    ),
    CompressionType.LZ4: (
        0x46A19A4F,
        "0000008a",
        "04224d1868406a000000000000007242000000ff03640000000c757365722d313a68656c6c6f2006"
        "0004ff00020a747261636504743146000e02012d0006a2776f726c64002400060457009033010402"
        "610102620000000000",
    ),
    CompressionType.ZSTD: (
        0x3FFFC378,
        "0000007b",
        "28b52ffd206a0d02004403640000000c757365722d313a68656c6c6f20020a747261636504743146"
        "000e0201776f726c64002400060433010402610102620003005a1810a8962a75b103",
    ),
}


@pytest.mark.parametrize("codec", list(CompressionType))
def test_golden_batch_from_kafka_python(codec: CompressionType) -> None:
    crc, length, records = GOLDEN[codec]
    data = bytes.fromhex(HEADER.format(length=length, crc=f"{crc:08x}", codec=int(codec)) + records)
    (batch,) = iter_batches(data)  # validates the CRC
    assert batch.crc == crc
    assert batch.compression is codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, 100)
    assert (batch.first_timestamp, batch.max_timestamp, batch.partition_leader_epoch) == (
        TS,
        TS + 7,
        0,
    )
    assert list(batch.records()) == RECORDS
