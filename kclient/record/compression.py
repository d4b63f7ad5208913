"""Compression codecs for record batches: Kafka's ``CompressionType`` and ``Compression`` classes.

Each codec writes what the Java client writes, so any Kafka broker or client reads it:

* gzip — a gzip stream (``GZIPOutputStream``), levels 1-9, default 6 (zlib's default).
* snappy — xerial's framing as ``SnappyOutputStream`` writes it: the 16-byte header
  ``\\x82SNAPPY\\x00`` + version 1 + compatible version 1, then blocks of
  ``[int32 length][raw snappy]`` of at most 32 KiB input each. Reading accepts that and
  raw (unframed) snappy. Needs ``cramjam`` (``pip install 'kclient-kafka[snappy]'``).
* lz4 — the LZ4 frame format with a correct header checksum, independent 64 KiB blocks
  (stored as is when they do not shrink), no block or content checksum, no content size
  (``Lz4BlockOutputStream``); read with ``lz4.frame``, which takes any frame. Levels 1-17;
  the default 9 uses LZ4's fast compressor, other levels its high-compression one, as Java
  does.
* zstd — a zstd frame (``ZstdOutputStream``), levels -131072..22, default 3. Needs
  ``zstandard`` (``pip install 'kclient-kafka[zstd]'``).

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

from kclient.errors import (
    ConfigError,
    CorruptRecordError,
    DecompressedSizeError,
    UnsupportedCodecError,
)


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

_SNAPPY_EXTRA = "pip install 'kclient-kafka[snappy]'"
_LZ4_MISSING = "compression.type=lz4 needs the 'lz4' package: pip install 'lz4>=4.3'"
_ZSTD_EXTRA = "pip install 'kclient-kafka[zstd]'"

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


def decompress(
    codec: CompressionType,
    data: bytes | memoryview,
    position: int = 0,
    max_bytes: int | None = None,
) -> bytes:
    """Decompress a batch's records section; ``position`` (the batch's byte offset) goes
    into the error message when the data is not valid for the codec.

    ``max_bytes`` bounds the output: data that would expand past it raises
    :class:`DecompressedSizeError` having taken at most about ``max_bytes`` of memory (a
    zstd frame announcing a larger size, or a snappy block, is refused before any output
    is made). ``None`` (clients reading what their own broker sent) means no bound.
    """
    try:
        if codec is GZIP:
            return _gunzip(data, max_bytes)
        if codec is LZ4:
            return _unlz4(data, max_bytes)
        if codec is SNAPPY:
            return _unsnappy(data, max_bytes)
        if codec is ZSTD:
            return _unzstd(data, max_bytes)
        if codec is NONE:
            if max_bytes is not None and len(data) > max_bytes:
                raise _too_large(max_bytes)
            return bytes(data)
    except (UnsupportedCodecError, DecompressedSizeError) as exc:
        if isinstance(exc, DecompressedSizeError):
            raise DecompressedSizeError(f"record batch at byte {position}: {exc}") from None
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptRecordError(
            f"record batch at byte {position}: {codec.name.lower()} data does not decompress: {exc}"
        ) from exc
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def _too_large(max_bytes: int) -> DecompressedSizeError:
    return DecompressedSizeError(f"its records expand to more than {max_bytes} bytes")


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


def _gunzip(data: bytes | memoryview, max_bytes: int | None) -> bytes:
    """One or more gzip members (Java's ``GZIPInputStream`` reads concatenated ones)."""
    out: list[bytes] = []
    produced = 0
    rest: bytes | memoryview = data
    while True:
        inflater = zlib.decompressobj(31)
        if max_bytes is None:
            chunk = inflater.decompress(rest)
        else:  # one byte more than allowed tells "too large" from "exactly the limit"
            chunk = inflater.decompress(rest, max_bytes - produced + 1)
            if produced + len(chunk) > max_bytes:
                raise _too_large(max_bytes)
        out.append(chunk)
        produced += len(chunk)
        if not inflater.eof:
            raise CorruptRecordError("gzip stream is truncated")
        rest = inflater.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)


def _unlz4(data: bytes | memoryview, max_bytes: int | None) -> bytes:
    """The first LZ4 frame (as Java's ``KafkaLZ4BlockInputStream`` reads it)."""
    if max_bytes is None:
        result: bytes = _lz4_frame().decompress(data)
        return result
    inflater = _lz4_frame().LZ4FrameDecompressor()
    out: bytes = inflater.decompress(data, max_bytes + 1)
    if len(out) > max_bytes:
        raise _too_large(max_bytes)
    if not inflater.eof:
        raise CorruptRecordError("lz4 frame is truncated")
    return out


def _unzstd(data: bytes | memoryview, max_bytes: int | None) -> bytes:
    """One or more zstd frames (Java writes one). With ``max_bytes``: a frame whose header
    announces more is refused at once; else one call that stops at the limit; only
    several frames, or a frame that fails that call, are read again in steps."""
    decompressor = _zstd_codec("decompressor", 0)
    if max_bytes is not None:
        zstd = _zstandard()
        announced = zstd.frame_content_size(data)  # -1: not in the header
        if announced > max_bytes:
            raise _too_large(max_bytes)
        try:
            result: bytes = decompressor.decompress(
                data,
                max_output_size=0 if announced >= 0 else max_bytes + 1,
                allow_extra_data=False,
            )
        except zstd.ZstdError:
            # several frames, a truncated or damaged frame, or more than max_bytes
            reader = decompressor.stream_reader(data, read_across_frames=True)
            if len(reader.read(max_bytes + 1)) > max_bytes:
                raise _too_large(max_bytes) from None
            # at most max_bytes: read it again whole, checking that every frame ends
        else:
            return result
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


def _unsnappy(data: bytes | memoryview, max_bytes: int | None) -> bytes:
    """xerial-framed snappy (Java's ``SnappyInputStream``), or one raw snappy block."""
    decompress_raw = _cramjam().snappy.decompress_raw
    view = memoryview(data)
    budget = -1 if max_bytes is None else max_bytes
    if len(view) < len(XERIAL_HEADER) or view[:8] != _XERIAL_MAGIC:
        _snappy_length(view, budget, max_bytes)
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
        block = view[pos : pos + size]
        if max_bytes is not None:
            budget -= _snappy_length(block, budget, max_bytes)
        parts.append(bytes(decompress_raw(block)))
        pos += size
    return b"".join(parts)


def _snappy_length(block: memoryview, budget: int, max_bytes: int | None) -> int:
    """The uncompressed length a raw snappy block announces (its leading varint), checked
    against what may still be produced (``budget``; unchecked when ``max_bytes`` is None)."""
    if max_bytes is None:
        return 0
    length = 0
    for i in range(min(5, len(block))):
        length |= (block[i] & 0x7F) << (7 * i)
        if block[i] < 0x80:
            break
    else:
        raise CorruptRecordError("snappy block does not start with its length")
    if length > budget:
        raise _too_large(max_bytes)
    return length


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
