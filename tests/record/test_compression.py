"""Codecs write what Java's producer writes (Kafka's Compression classes) and fail clearly."""

from __future__ import annotations

import gzip
import random
import re
import struct
import sys
import threading
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from kclient.errors import (
    ConfigError,
    CorruptRecordError,
    DecompressedSizeError,
    UnsupportedCodecError,
)
from kclient.record import CompressionType, RecordBatchBuilder, iter_batches
from kclient.record.compression import compress, decompress, resolve_level

DATA = b"".join(b"record %06d with a fairly repetitive payload. " % i for i in range(3000))
ALL = list(CompressionType)


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 for inputs under 16 bytes (the LZ4 frame descriptor), from the xxHash spec."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    assert len(data) < 16
    h = (seed + p5 + len(data)) & mask
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & mask, 17) * p4 & mask
        i += 4
    for byte in data[i:]:
        h = rotl((h + byte * p5) & mask, 11) * p1 & mask
    h ^= h >> 15
    h = h * p2 & mask
    h ^= h >> 13
    h = h * p3 & mask
    return h ^ (h >> 16)


def test_names_and_ids() -> None:
    assert [(c.name, c.value) for c in CompressionType] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]
    assert CompressionType.from_name("lz4") is CompressionType.LZ4
    assert CompressionType.from_name(" ZStd ") is CompressionType.ZSTD
    with pytest.raises(UnsupportedCodecError, match="'lzma'; valid values: none, gzip, snappy"):
        CompressionType.from_name("lzma")


@pytest.mark.parametrize(
    ("codec", "good", "bad"),
    [
        (CompressionType.GZIP, [1, 9], [0, 10, -1]),
        (CompressionType.LZ4, [1, 9, 17], [0, 18]),
        (CompressionType.ZSTD, [-131072, 0, 3, 22], [-131073, 23]),
        (CompressionType.NONE, [], [1]),
        (CompressionType.SNAPPY, [], [0, 1]),
    ],
)
def test_levels_follow_kafkas_ranges(
    codec: CompressionType, good: list[int], bad: list[int]
) -> None:
    assert resolve_level(codec, None) is None
    for level in good:
        assert resolve_level(codec, level) == level
        builder = RecordBatchBuilder(codec, compression_level=level)
        builder.append(0, None, DATA[:5000])
        (batch,) = iter_batches(builder.build())
        assert next(batch.records()).value == DATA[:5000]
    for level in bad:
        with pytest.raises(ConfigError, match=codec.name.lower()):
            RecordBatchBuilder(codec, compression_level=level)
    with pytest.raises(ConfigError, match="must be an int"):
        resolve_level(codec, True)


@pytest.mark.parametrize("codec", ALL)
def test_round_trip_small_and_large(codec: CompressionType) -> None:
    for data in (b"", b"x", DATA, DATA * 5):
        assert decompress(codec, compress(codec, data)) == data


def test_gzip_is_a_gzip_stream() -> None:
    out = compress(CompressionType.GZIP, DATA, 1)
    assert out[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(out) == DATA
    assert len(compress(CompressionType.GZIP, DATA, 9)) <= len(out)
    members = gzip.compress(b"first ") + gzip.compress(b"second")  # concatenated members
    assert decompress(CompressionType.GZIP, members) == b"first second"


def test_snappy_uses_xerial_framing_in_32k_blocks() -> None:
    out = compress(CompressionType.SNAPPY, DATA)
    assert out[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    pos, blocks = 16, []
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(out)
    assert [len(b) for b in blocks] == [32768] * (len(DATA) // 32768) + [len(DATA) % 32768]
    assert b"".join(blocks) == DATA


def test_snappy_reads_raw_snappy_too() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(CompressionType.SNAPPY, raw) == DATA


def lz4_blocks(frame: bytes) -> list[tuple[bool, int]]:
    """(compressed?, stored size) of each block of a frame without optional fields."""
    pos, blocks = 7, []
    while (word := int.from_bytes(frame[pos : pos + 4], "little")) != 0:
        size = word & 0x7FFFFFFF
        blocks.append((not word & 0x80000000, size))
        pos += 4 + size
    assert pos + 4 == len(frame)  # the end mark closes the frame
    return blocks


def test_lz4_frame_is_what_kafkas_lz4_block_output_stream_writes() -> None:
    data = DATA * 3
    out = compress(CompressionType.LZ4, data)
    assert out[:4] == b"\x04\x22\x4d\x18"  # frame magic 0x184D2204, little-endian
    flg, bd, header_checksum = out[4], out[5], out[6]
    assert flg == 0x60  # version 01, independent blocks, no checksums, no content size
    assert bd == 0x40  # 64 KiB maximum block size
    assert header_checksum == (xxh32_short(bytes([flg, bd])) >> 8) & 0xFF  # the correct one
    blocks = lz4_blocks(out)
    assert len(blocks) == -(-len(data) // 65536)  # 64 KiB of input per block
    assert all(compressed for compressed, _ in blocks)
    info = lz4.frame.get_frame_info(out)
    assert (info["block_size"], info["block_linked"], info["content_size"]) == (65536, False, 0)
    assert lz4.frame.decompress(out) == data
    # Java's default level 9 uses LZ4's fast compressor; other levels the high-compression one
    assert compress(CompressionType.LZ4, data, 9) == out
    assert len(compress(CompressionType.LZ4, data, 12)) < len(out)
    assert lz4.frame.decompress(compress(CompressionType.LZ4, data, 17)) == data


def test_lz4_stores_incompressible_blocks_as_is() -> None:
    noise = random.Random(7).randbytes(100_000)
    out = compress(CompressionType.LZ4, noise)
    assert lz4_blocks(out) == [(False, 65536), (False, 100_000 - 65536)]
    assert lz4.frame.decompress(out) == decompress(CompressionType.LZ4, out) == noise


def test_xxh32_matches_the_reference_vector() -> None:
    assert xxh32_short(b"") == 0x02CC5D05


def test_zstd_frames_with_and_without_content_size() -> None:
    out = compress(CompressionType.ZSTD, DATA, 5)
    assert out[:4] == b"\x28\xb5\x2f\xfd"
    streamed = zstandard.ZstdCompressor().compressobj()  # no content size, as Java writes
    frame = streamed.compress(DATA) + streamed.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, frame) == DATA
    assert decompress(CompressionType.ZSTD, out + frame) == DATA + DATA


@pytest.mark.parametrize("codec", [c for c in ALL if c is not CompressionType.NONE])
@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_bad_compressed_data_is_a_corrupt_record(codec: CompressionType, damage: str) -> None:
    good = compress(codec, DATA)
    if damage == "truncate":
        bad = good[: len(good) // 2]
    elif damage == "garbage":
        bad = bytes(range(64)) * 4
    else:
        flipped = bytearray(good)
        for i in range(len(flipped) // 3, len(flipped), 97):
            flipped[i] ^= 0x5A
        bad = bytes(flipped)
    with pytest.raises(CorruptRecordError, match=f"byte 123: {codec.name.lower()} data"):
        decompress(codec, bad, position=123)


@pytest.mark.parametrize(
    ("codec", "module", "extra"),
    [
        (CompressionType.SNAPPY, "cramjam", "pip install 'kclient-kafka[snappy]'"),
        (CompressionType.ZSTD, "zstandard", "pip install 'kclient-kafka[zstd]'"),
    ],
)
def test_missing_optional_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, codec: CompressionType, module: str, extra: str
) -> None:
    builder = RecordBatchBuilder(codec)
    builder.append(0, b"k", b"v")
    data = builder.build()
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package looks like
    with pytest.raises(UnsupportedCodecError, match=re.escape(f"'{module}' package: {extra}")):
        RecordBatchBuilder(codec)
    (batch,) = iter_batches(data)  # the header still reads
    with pytest.raises(UnsupportedCodecError, match=re.escape(extra)):
        list(batch.records())


def test_codecs_from_many_threads_at_once() -> None:
    """zstd contexts are kept per thread; sharing one between threads would corrupt data."""
    results: dict[int, bool] = {}

    def work(seed: int) -> None:
        data = random.Random(seed).randbytes(2000) * 20
        ok = True
        for codec in ALL:
            for level in (None, 1) if codec is CompressionType.ZSTD else (None,):
                ok &= decompress(codec, compress(codec, data, level)) == data
        results[seed] = ok

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == dict.fromkeys(range(6), True)


# ---- a bound on what decompression may produce (the broker's max.message.bytes) ---------

LIMITED = [c for c in CompressionType if c is not CompressionType.NONE]


@pytest.mark.parametrize("codec", [*LIMITED, CompressionType.NONE])
def test_output_up_to_the_limit_passes_and_one_byte_more_does_not(
    codec: CompressionType,
) -> None:
    data = compress(codec, DATA)
    assert decompress(codec, data, 0, max_bytes=len(DATA)) == DATA
    with pytest.raises(DecompressedSizeError, match=f"more than {len(DATA) - 1} bytes"):
        decompress(codec, data, 0, max_bytes=len(DATA) - 1)


def bomb(codec: CompressionType) -> bytes:
    """64 MiB of zeros in at most about 3 MiB (snappy's best ratio is 21), made 1 MiB at
    a time."""
    chunk = b"\x00" * (1 << 20)
    if codec is CompressionType.GZIP:
        deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(deflater.compress(chunk) for _ in range(64)) + deflater.flush()
    if codec is CompressionType.ZSTD:  # Java's frames carry no content size
        zstd = zstandard.ZstdCompressor(write_content_size=False).compressobj()
        return b"".join(zstd.compress(chunk) for _ in range(64)) + zstd.flush()
    if codec is CompressionType.LZ4:
        lz4_stream = lz4.frame.LZ4FrameCompressor()
        parts = [lz4_stream.begin()] + [lz4_stream.compress(chunk) for _ in range(64)]
        return b"".join(parts) + lz4_stream.flush()
    block = bytes(cramjam.snappy.compress_raw(chunk))
    return compress(CompressionType.SNAPPY, b"")[:16] + b"".join(
        struct.pack(">i", len(block)) + block for _ in range(64)
    )


@pytest.mark.parametrize("codec", LIMITED)
def test_a_bomb_is_refused_having_taken_about_the_limit(codec: CompressionType) -> None:
    data = bomb(codec)
    assert len(data) < 4 << 20
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedSizeError, match="at byte 61: its records expand"):
            decompress(codec, data, 61, max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{codec.name}: {peak} bytes"


def test_a_zstd_frame_announcing_too_much_is_refused_before_decompressing() -> None:
    frame = zstandard.ZstdCompressor().compress(b"\x00" * (8 << 20))  # content size: 8 MiB
    assert zstandard.frame_content_size(frame) == 8 << 20
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedSizeError):
            decompress(CompressionType.ZSTD, frame, 0, max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_several_zstd_frames_count_together() -> None:
    two = compress(CompressionType.ZSTD, b"a" * 100) + compress(CompressionType.ZSTD, b"b" * 100)
    assert decompress(CompressionType.ZSTD, two, 0, max_bytes=200) == b"a" * 100 + b"b" * 100
    with pytest.raises(DecompressedSizeError):
        decompress(CompressionType.ZSTD, two, 0, max_bytes=199)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(CompressionType.ZSTD, two[:-4], 0, max_bytes=1000)


def test_a_snappy_block_announcing_too_much_is_refused() -> None:
    raw = bytes(cramjam.snappy.compress_raw(b"x" * 5000))
    with pytest.raises(DecompressedSizeError):
        decompress(CompressionType.SNAPPY, raw, 0, max_bytes=4999)
    assert decompress(CompressionType.SNAPPY, raw, 0, max_bytes=5000) == b"x" * 5000
