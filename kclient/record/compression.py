"""Compression codecs for record batches: Kafka's ``CompressionType`` and ``Compression`` classes.

Each codec writes what the Java client writes, so any Kafka broker or client reads it:

* gzip — a gzip stream (``GZIPOutputStream``), levels 1-9, default 6 (zlib's default).
* snappy — xerial's framing as ``SnappyOutputStream`` writes it: the 16-byte header
  ``\\x82SNAPPY\\x00`` + version 1 + compatible version 1, then blocks of
  ``[int32 length][raw snappy]`` of at most 32 KiB input each. Reading accepts that and
  raw (unframed) snappy. Needs ``cramjam`` (``pip install 'kclient[snappy]'``).
* lz4 — the LZ4 frame format with a correct header checksum, independent 64 KiB blocks
  (stored as is when they do not shrink), no block or content checksum, no content size
  (``Lz4BlockOutputStream``); read with ``lz4.frame``, which takes any frame. Levels 1-17;
  the default 9 uses LZ4's fast compressor, other levels its high-compression one, as Java
  does.
* zstd — a zstd frame (``ZstdOutputStream``), levels -131072..22, default 3. Needs
  ``zstandard`` (``pip install 'kclient[zstd]'``).

Optional packages are imported when a codec is first used, so ``kclient.record`` imports
without them; a missing one raises :class:`UnsupportedCodecError` naming the pip extra.
Functions for any thread (zstd contexts are kept per thread).
"""

from __future__ import annotations

import struct
import threading
import zlib
from enum import IntEnum
from typing import Any

from kclient.errors import ConfigError, CorruptRecordError, UnsupportedCodecError


class CompressionType(IntEnum):
    """The codec ids stored in bits 0-2 of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec for a ``compression.type`` value (``"lz4"``; case-insensitive)."""
        try:
            return cls[name.strip().upper()]
        except (KeyError, AttributeError):
            valid = ", ".join(member.name.lower() for member in cls)
            raise UnsupportedCodecError(
                f"unknown compression.type {name!r}; valid values: {valid}"
            ) from None

    @classmethod
    def of(cls, value: CompressionType | int | str) -> CompressionType:
        """Accept a member, its id (``3``) or its name (``"lz4"``)."""
        if isinstance(value, str):
            return cls.from_name(value)
        codec = None if isinstance(value, bool) else _BY_ID.get(value)
        if codec is None:
            valid = ", ".join(f"{member.value} ({member.name.lower()})" for member in cls)
            raise UnsupportedCodecError(f"unknown compression codec {value!r}; valid ids: {valid}")
        return codec


# Plain module constants: in Python < 3.12 ``CompressionType.NONE`` is a slow class lookup.
NONE = CompressionType.NONE
GZIP = CompressionType.GZIP
SNAPPY = CompressionType.SNAPPY
LZ4 = CompressionType.LZ4
ZSTD = CompressionType.ZSTD
_BY_ID = {member.value: member for member in CompressionType}

# Kafka's valid compression levels (CompressionType.{GZIP,LZ4,ZSTD}.minLevel/maxLevel).
LEVEL_RANGES: dict[CompressionType, tuple[int, int, int]] = {
    # codec: (min, max, default)
    GZIP: (1, 9, 6),
    LZ4: (1, 17, 9),
    ZSTD: (-131072, 22, 3),
}

_SNAPPY_EXTRA = "pip install 'kclient[snappy]'"
_LZ4_MISSING = "compression.type=lz4 needs the 'lz4' package: pip install 'lz4>=4.3'"
_ZSTD_EXTRA = "pip install 'kclient[zstd]'"

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_MAGIC = XERIAL_HEADER[:8]
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

# The LZ4 frame Lz4BlockOutputStream writes: magic 0x184D2204 (little-endian); FLG 0x60 =
# version 1, independent blocks, no block checksum, no content size, no content checksum;
# BD 0x40 = 64 KiB blocks; header checksum = (xxh32(FLG BD) >> 8) & 0xFF = 0x82.
LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000  # high bit of a block length: stored as is
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_LZ4_MAX_LEVEL = 12  # LZ4 treats higher levels as 12
_UINT32_LE = struct.Struct("<I")

_THREAD = threading.local()  # per-thread zstd contexts


def resolve_level(codec: CompressionType, level: int | None) -> int | None:
    """Check ``level`` against Kafka's range for ``codec``; ``None`` means the codec default.

    Raises :class:`ConfigError` for a level outside the range, or any level for none/snappy
    (which have no levels in Kafka either).
    """
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(f"compression level must be an int, got {type(level).__name__}")
    bounds = LEVEL_RANGES.get(codec)
    if bounds is None:
        raise ConfigError(
            f"compression.type={codec.name.lower()} has no compression level "
            f"(got {level}); levels exist for gzip, lz4 and zstd"
        )
    low, high, _ = bounds
    if not low <= level <= high:
        name = codec.name.lower()
        raise ConfigError(
            f"compression.{name}.level={level} is out of range: {name} accepts {low}..{high}"
        )
    return level


def ensure_available(codec: CompressionType) -> None:
    """Raise :class:`UnsupportedCodecError` now if ``codec``'s package is not installed."""
    if codec is SNAPPY:
        _cramjam()
    elif codec is ZSTD:
        _zstandard()
    elif codec is LZ4:
        _lz4_block()
        _lz4_frame()


def compress(codec: CompressionType, data: bytes, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec`` as Kafka's Java producer does."""
    if codec is GZIP:
        compressor = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec is LZ4:
        return _lz4_frame_compress(data, level)
    if codec is SNAPPY:
        compress_raw = _cramjam().snappy.compress_raw
        view = memoryview(data)
        parts = [XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
            block = bytes(compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec is ZSTD:
        result: bytes = _zstd_codec("compressor", 3 if level is None else level).compress(data)
        return result
    if codec is NONE:
        return data
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def decompress(codec: CompressionType, data: bytes | memoryview, position: int = 0) -> bytes:
    """Decompress a batch's records section; ``position`` (the batch's byte offset) goes
    into the error message when the data is not valid for the codec."""
    try:
        if codec is GZIP:
            return _gunzip(data)
        if codec is LZ4:
            result: bytes = _lz4_frame().decompress(data)
            return result
        if codec is SNAPPY:
            return _unsnappy(data)
        if codec is ZSTD:
            return _unzstd(data)
        if codec is NONE:
            return bytes(data)
    except UnsupportedCodecError:
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptRecordError(
            f"record batch at byte {position}: {codec.name.lower()} data does not decompress: {exc}"
        ) from exc
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


_CHUNK = 256 * 1024  # decompressed bytes looked at per step when only counting


def decompressed_size(
    codec: CompressionType, data: bytes | memoryview, limit: int, position: int = 0
) -> int:
    """How many bytes ``data`` decompresses to, counted without keeping them, checking
    that it decompresses; stops early and returns ``limit + 1`` once past ``limit`` (a
    small batch can expand to gigabytes). Raises CorruptRecordError like ``decompress``."""
    try:
        if codec is GZIP:
            return _gzip_size(data, limit)
        if codec is LZ4:
            return _lz4_size(data, limit)
        if codec is ZSTD:
            if _zstd_size(data, limit) > limit:
                return limit + 1
        elif codec is SNAPPY:
            if _snappy_declared_size(data) > limit:
                return limit + 1
        elif codec is NONE:
            return min(len(data), limit + 1)
    except (UnsupportedCodecError, CorruptRecordError):
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptRecordError(
            f"record batch at byte {position}: {codec.name.lower()} data does not decompress: {exc}"
        ) from exc
    return len(decompress(codec, data, position))  # within the limit: bounded


def _gzip_size(data: bytes | memoryview, limit: int) -> int:
    total = 0
    rest = bytes(data)
    while True:  # one gzip member after another
        inflater = zlib.decompressobj(31)
        pending = rest
        while True:
            total += len(inflater.decompress(pending, _CHUNK))
            if total > limit:
                return limit + 1
            pending = inflater.unconsumed_tail
            if inflater.eof or not pending:
                break
        if not inflater.eof:
            total += len(inflater.flush())
            if not inflater.eof:
                raise CorruptRecordError("gzip stream is truncated")
        rest = inflater.unused_data
        if not rest:
            return total


def _lz4_size(data: bytes | memoryview, limit: int) -> int:
    frame = _lz4_frame()
    total = 0
    rest = bytes(data)
    while rest:  # one frame after another
        decompressor = frame.LZ4FrameDecompressor()
        total += len(decompressor.decompress(rest, max_length=_CHUNK))
        while not decompressor.eof and total <= limit and not decompressor.needs_input:
            total += len(decompressor.decompress(b"", max_length=_CHUNK))
        if total > limit:
            return limit + 1
        if not decompressor.eof:
            raise CorruptRecordError("lz4 frame is truncated")
        rest = decompressor.unused_data
    return total


def _zstd_size(data: bytes | memoryview, limit: int) -> int:
    total = 0
    decompressor = _zstd_codec("decompressor", 0)
    with decompressor.stream_reader(bytes(data), read_across_frames=True) as reader:
        while total <= limit:
            chunk = reader.read(_CHUNK)
            if not chunk:
                break
            total += len(chunk)
    return total


def _snappy_declared_size(data: bytes | memoryview) -> int:
    """The uncompressed sizes the (xerial) snappy blocks declare, added up."""
    declared = _cramjam().snappy.decompress_raw_len
    view = memoryview(data)
    if len(view) < len(XERIAL_HEADER) or view[:8] != _XERIAL_MAGIC:
        return int(declared(view))
    total = 0
    pos = len(XERIAL_HEADER)
    while pos + 4 <= len(view):
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            break  # decompress() then says what is wrong
        total += int(declared(view[pos : pos + size]))
        pos += size
    return total


def _lz4_frame_compress(data: bytes, level: int | None) -> bytes:
    """Java's ``Lz4BlockOutputStream``: the default level 9 uses LZ4's fast compressor, other
    levels its high-compression one; a block that does not shrink is stored as is."""
    block_compress = _lz4_block().compress
    if level is None or level == LEVEL_RANGES[LZ4][2]:
        options: dict[str, Any] = {"mode": "default"}
    else:
        options = {"mode": "high_compression", "compression": min(level, _LZ4_MAX_LEVEL)}
    view = memoryview(data)
    parts = [LZ4_FRAME_HEADER]
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        block: bytes = block_compress(chunk, store_size=False, **options)
        if len(block) < len(chunk):
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
        else:
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED))
            parts.append(chunk.tobytes())
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _gunzip(data: bytes | memoryview) -> bytes:
    out = []
    rest = bytes(data)
    while True:
        inflater = zlib.decompressobj(31)
        out.append(inflater.decompress(rest))
        if not inflater.eof:
            raise CorruptRecordError("gzip stream is truncated")
        rest = inflater.unused_data
        if not rest:
            return b"".join(out)


def _unzstd(data: bytes | memoryview) -> bytes:
    decompressor = _zstd_codec("decompressor", 0)
    out = []
    rest = bytes(data)
    while True:  # Java writes one frame; concatenated frames are valid zstd too
        stream = decompressor.decompressobj()
        out.append(stream.decompress(rest))
        if not stream.eof:
            raise CorruptRecordError("zstd frame is truncated")
        rest = stream.unused_data
        if not rest:
            return b"".join(out)


def _zstd_codec(kind: str, level: int) -> Any:
    """A ZstdCompressor (per level) or ZstdDecompressor of this thread: creating one costs
    about as much as compressing a 16 KiB batch, and they must not be shared between threads."""
    zstd = _zstandard()  # also: fail clearly if the package has gone
    cache: dict[tuple[str, int], Any] | None = getattr(_THREAD, "zstd", None)
    if cache is None:
        cache = _THREAD.zstd = {}
    codec = cache.get((kind, level))
    if codec is None:
        if kind == "compressor":
            codec = zstd.ZstdCompressor(level=level)
        else:
            codec = zstd.ZstdDecompressor()
        cache[kind, level] = codec
    return codec


def _unsnappy(data: bytes | memoryview) -> bytes:
    decompress_raw = _cramjam().snappy.decompress_raw
    view = memoryview(data)
    if len(view) < len(XERIAL_HEADER) or view[:8] != _XERIAL_MAGIC:
        return bytes(decompress_raw(view))
    parts = []
    pos = len(XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"xerial snappy block length at byte {pos} is truncated")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError(
                f"xerial snappy block at byte {pos} claims {size} bytes, {end - pos} remain"
            )
        parts.append(bytes(decompress_raw(view[pos : pos + size])))
        pos += size
    return b"".join(parts)


def _lz4_frame() -> Any:
    try:
        import lz4.frame
    except ImportError:
        raise UnsupportedCodecError(_LZ4_MISSING) from None
    return lz4.frame


def _lz4_block() -> Any:
    try:
        import lz4.block
    except ImportError:
        raise UnsupportedCodecError(_LZ4_MISSING) from None
    return lz4.block


def _cramjam() -> Any:
    try:
        import cramjam
    except ImportError:
        raise UnsupportedCodecError(
            f"compression.type=snappy needs the 'cramjam' package: {_SNAPPY_EXTRA}"
        ) from None
    return cramjam


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        raise UnsupportedCodecError(
            f"compression.type=zstd needs the 'zstandard' package: {_ZSTD_EXTRA}"
        ) from None
    return zstandard
