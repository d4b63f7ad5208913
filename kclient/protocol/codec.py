"""The one generic encoder/decoder for every declared message and version.

Corresponds to what Kafka's generator emits as ``XxxData.read``/``write`` (and to
``MessageUtil``), but built from the declarations in ``schema.py`` at run time instead of
generated as a class per message. Sans-I/O; plans are immutable once built (but for the
frame codecs they build on first use) and caches are only ever filled with equal values,
so any thread may use them.

``plan(message, version)`` builds, once, a ``Plan`` with two codecs of the declaration:

- The fast path (``codegen``): Python source written for this one message and
  version — nested structs and arrays as inline loops, each run of fixed-width fields
  (with the int16/int32 length of the field after it) as one precompiled
  ``struct.Struct`` call, no call per field —
  compiled with ``exec``. It reads a ``memoryview`` at an offset and writes to a
  ``bytearray``. On anything it does not handle (a wrong type, a truncated or malformed
  frame) it just raises, whatever the exception; it never reports errors itself.
  ``Plan.request_encoder``/``response_decoder`` are the same fused with the request or
  response header around the body, for ``frame.py``.
- The careful path (``careful``): a list of small steps (closures) per struct. It is the
  reference the fast path mirrors, runs whenever the fast path gives up, and raises the precise
  ``DecodeError``/``EncodeError`` (field path, byte offset). The fast path also hands it
  the rare parts outright: tagged-field sections that are not empty, varints longer than
  a byte. A fast-path failure leaves no trace: the reader's position and the writer's
  contents are only touched on success.

Bodies are plain dicts keyed by snake_case field names.

- Encode: a missing key encodes as the field's declared default; a field without one
  (``F(..., default=...)``) must be given, and a key the message does not declare in any
  version is refused (``EncodeError`` naming it: a misspelt ``"ackz"`` must not quietly
  send the default ``acks``). Keys for fields declared in other versions only are
  ignored, so one body serves every version. ``records`` accepts bytes/bytearray/
  memoryview or a list/tuple of them; those buffers go into the output buffer list by
  reference, never copied.
- Decode: every regular field of the version is present. ``records`` decode to a
  zero-copy ``memoryview`` of the input (or ``None``); it keeps the input alive, so copy
  it (``bytes(view)``) before reusing a receive buffer.
- Tagged fields are optional by nature, so they are keyed by presence: decode puts a
  tagged field in the dict only when it was on the wire, and encode writes it exactly
  when its key is present (``None`` counts as absent unless the field is nullable). Use
  ``body.get("current_leader")``. Unknown tags are kept under ``"_unknown_tagged_fields"``
  ({tag: bytes}) and written back, so decode → encode gives back the very same bytes,
  even from peers that write default-valued tags (tansu does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kclient.protocol.careful import UNKNOWN_TAGGED, compile_struct
from kclient.protocol.codegen import Source, decoder_source, encoder_source
from kclient.protocol.schema import Message
from kclient.protocol.types import (
    Buffer,
    DecodeError,
    EncodeError,
    Reader,
    Writer,
)

__all__ = [
    "UNKNOWN_TAGGED",
    "Buffer",
    "FastDecoder",
    "FastEncoder",
    "Plan",
    "RequestEncoder",
    "ResponseDecoder",
    "Writer",
    "plan",
]


# ``fast_decode(buf, pos, items_left)`` → (body, position after it), decoding at most
# ``items_left`` array items (``Reader.items_left``); ``buf`` is a 1-D memoryview of
# bytes. ``fast_encode(buf, parts, body)`` → (tail, flushed) appends to ``buf``; each
# record buffer it takes by reference goes to ``parts`` after the bytearray written so
# far, and writing goes on in a new bytearray. ``tail`` is the bytearray written last
# (``buf`` itself when nothing was referenced), ``flushed`` the bytes now in ``parts``
# (from ``buf``'s start on), so the whole encode is ``flushed + len(tail)`` bytes long.
FastDecoder = Callable[[memoryview, int, int], tuple[dict[str, Any], int]]
FastEncoder = Callable[[bytearray, list[Buffer], Mapping[str, Any]], tuple[bytearray, int]]
# The same fused with the frame around the body, for ``frame.py``'s hot paths (see
# ``Plan.request_encoder`` and ``Plan.response_decoder``).
RequestEncoder = Callable[[bytearray, int, Mapping[str, Any]], list[Buffer]]
ResponseDecoder = Callable[[Buffer], tuple[int, dict[str, Any]]]


class Plan:
    """The compiled codecs of one message at one version (see the module docstring)."""

    __slots__ = (
        "_decode",
        "_encode",
        "_request_encoder",
        "_response_decoders",
        "fast_decode",
        "fast_encode",
        "flexible",
        "label",
        "message",
        "sources",
        "version",
    )

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        self.flexible = message.is_flexible(version)
        self.label = f"{message.name} v{version}"
        self._decode, self._encode, _ = compile_struct(message.fields, version, self.flexible)
        self.sources: dict[str, str] = {}  # generated source by function name, for debugging
        self.fast_decode: FastDecoder = self._generate(decoder_source(message, version, None))
        self.fast_encode: FastEncoder = self._generate(encoder_source(message, version, False))
        self._request_encoder: RequestEncoder | None = None
        self._response_decoders: dict[int, ResponseDecoder] = {}

    def _generate(self, src: Source) -> Any:
        function, self.sources[src.name] = src.compile(self.label)
        return function

    def request_encoder(self) -> RequestEncoder:
        """The fast path of a whole request frame: ``encode(header, correlation_id, body)``.

        ``header`` is the request header with zeros for the size and the correlation id
        (``frame.py`` keeps one per client id); the result is the frame's buffer list, as
        ``frame.encode_request`` returns it. Like ``fast_encode`` it raises on anything
        it leaves to the careful path. Built on first use.
        """
        found = self._request_encoder
        if found is None:
            found = self._request_encoder = self._generate(
                encoder_source(self.message, self.version, True)
            )
        return found

    def response_decoder(self, header_version: int) -> ResponseDecoder:
        """The fast path of a whole response frame (no size prefix): ``decode(frame)`` →
        (correlation id, body), for response header v0 or v1 (only without header tagged
        fields). Like ``fast_decode`` it raises on anything it leaves to the careful path,
        including bytes left after the body. Built on first use."""
        found = self._response_decoders.get(header_version)
        if found is None:
            found = self._response_decoders[header_version] = self._generate(
                decoder_source(self.message, self.version, header_version)
            )
        return found

    def decode(self, reader: Reader) -> dict[str, Any]:
        """Decode a body from ``reader`` (which may hold more bytes after it)."""
        try:
            body, reader.pos = self.fast_decode(reader.buf, reader.pos, reader.items_left)
        except Exception:  # anything unusual: the careful path decodes or says what is wrong
            return self.decode_careful(reader)
        return body

    def decode_careful(self, reader: Reader) -> dict[str, Any]:
        """``decode`` by the careful path only (the reference the fast path must match)."""
        try:
            body: dict[str, Any] = self._decode(reader)
        except DecodeError as exc:
            exc.context = self.label
            raise
        return body

    def decode_rest(self, reader: Reader) -> dict[str, Any]:
        """Decode a body that must take up everything left in ``reader``."""
        body = self.decode(reader)
        if reader.remaining():
            raise reader.error(self.label, f"{reader.remaining()} unexpected bytes after the body")
        return body

    def decode_all(self, data: Buffer) -> dict[str, Any]:
        """Decode a body that must span all of ``data`` (a frame without its header)."""
        return self.decode_rest(Reader(data))

    def encode_into(self, writer: Writer, body: Mapping[str, Any]) -> None:
        buf = writer.buf
        mark = len(buf)
        parts: list[Buffer] = []
        try:
            tail, _ = self.fast_encode(buf, parts, body)
        except Exception:  # undo what the fast path wrote; the careful path says what is wrong
            del buf[mark:]
            self.encode_careful_into(writer, body)
            return
        if parts:
            writer.parts += parts
            writer.buf = tail

    def encode_careful_into(self, writer: Writer, body: Mapping[str, Any]) -> None:
        """``encode_into`` by the careful path only (the reference the fast path must match)."""
        try:
            self._encode(writer, body)
        except EncodeError as exc:
            exc.context = self.label
            raise

    def encode(self, body: Mapping[str, Any]) -> list[Buffer]:
        parts: list[Buffer] = []
        try:
            tail, _ = self.fast_encode(bytearray(), parts, body)
        except Exception:
            writer = Writer()
            self.encode_careful_into(writer, body)
            return writer.buffers()
        if tail or not parts:
            parts.append(tail)
        return parts


_PLANS: dict[tuple[int, int], Plan] = {}


def plan(message: Message, version: int) -> Plan:
    """The cached plan of ``message`` at ``version`` (compiled on first use)."""
    found = _PLANS.get((id(message), version))
    if found is None or found.message is not message:
        if version not in message.valid:
            raise EncodeError(f"{message.name} has no version {version} (valid: {message.valid})")
        found = _PLANS[(id(message), version)] = Plan(message, version)
    return found
