from collections.abc import Callable, Sequence
from typing import Any

IOV_MAX: int
FIRST_FRAME_BUFFER_BYTES: int

def bind(
    peer_closed_error: type[Exception],
    protocol_decode_error: type[Exception],
    ssl_socket_type: type,
    tls_recv_into: Callable[..., int | None],
    /,
) -> None: ...

class NetworkSend:
    destination: int
    awaits_response: bool
    size: int
    remaining: int
    _buffers: list[bytes | bytearray | memoryview]
    _index: int
    _tls_chunked: bool
    def __new__(
        cls,
        destination: int,
        buffers: Sequence[bytes | bytearray | memoryview],
        *,
        awaits_response: bool = True,
    ) -> NetworkSend: ...
    @property
    def completed(self) -> bool: ...
    def write_to(self, sock: Any, /) -> int: ...
    def _advance(self, written: int, /) -> None: ...

class NetworkReceive:
    source: int
    payload: bytearray
    size: int
    filled: int
    def __new__(
        cls, source: int, payload: bytearray, filled: int | None = None, size: int | None = None
    ) -> NetworkReceive: ...
    @property
    def complete(self) -> bool: ...
    def read_from(self, sock: Any, /) -> int | None: ...

class Channel:
    node_id: int
    sock: Any
    address: str
    max_receive_bytes: int
    tls_context: Any
    send: Any
    receive: Any
    _chunk: bytearray
    _chunk_view: memoryview
    _chunk_len: int
    def read(self, completed: list[Any], /) -> None: ...
    def write(self) -> Any: ...

# _selector.c, _selector_util.c, _loop_select.c: KSelector's and LoopSelector's C methods.

def bind_selector(
    kselector: type,
    idle_expiry_manager: type,
    channel: type,
    /,
) -> None: ...
def selector_send(kselector: Any, send: Any, /) -> bool: ...
def loop_readable(loop_selector: Any, fd: int, /) -> None: ...

class SelectorPoll:
    """KSelector.poll: the common case in C, anything else the Python ``general``."""

    def __init__(self, general: Callable[..., None], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., None]: ...

class ChannelReady:
    """KSelector.is_channel_ready in C (``general``: the Python, for other calls)."""

    def __init__(self, general: Callable[..., bool], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., bool]: ...

class LoopSelect:
    """LoopSelector.select in C (``general``: the Python, for other calls)."""

    def __init__(self, general: Callable[..., list[Any]], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., list[Any]]: ...
