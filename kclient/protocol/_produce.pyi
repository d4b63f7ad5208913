from collections.abc import Callable, Mapping
from typing import Any

from kclient.protocol.codec import Buffer

def bind(
    encode_produce: Callable[..., list[Buffer] | None],
    decode_produce: Callable[..., tuple[int, dict[str, Any]] | None],
    prefixes: dict[Any, bytes | None],
    make_prefix: Callable[..., bytes | None],
    uuid_type: type,
    topic_id: Callable[[bytes], Any],
    ids: dict[bytes, Any],
    /,
) -> None: ...
def assemble(
    prefix: bytes, flexible: bool, correlation_id: int, index: int, records: bytes, /
) -> list[Buffer] | None: ...
def encode_produce(
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
    generic: Callable[[int, int, int, str | None, Mapping[str, Any]], list[Buffer]],
) -> list[Buffer] | None: ...
def decode_produce(api_version: int, frame: Buffer) -> tuple[int, dict[str, Any]] | None: ...
