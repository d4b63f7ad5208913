from collections.abc import Callable, Sequence
from typing import Any

def bind(
    in_flight_request_type: type,
    decode_produce: Callable[..., Any],
    decode_response: Callable[..., Any],
    new_client_response: Callable[..., Any],
    decode_errors: tuple[type[Exception], ...],
    /,
) -> None: ...
def complete_receives(
    receives: Sequence[Any], in_flight: Any, responses: list[Any], now_ms: int, /
) -> int: ...
def bind_send(
    client_request_type: type,
    encode_produce: Callable[..., Any],
    encode_request: Callable[..., Any],
    careful_encode: Callable[..., Any],
    network_send: type,
    /,
) -> None: ...
def write_request(client: Any, request: Any, now_ms: int, /) -> bool: ...
def can_send(client: Any, node_id: int, now_ms: int, /) -> bool: ...
def bind_client(
    network_client_type: type,
    in_flight_requests_type: type,
    ckselector_type: type | None,
    selector_send: Callable[[Any, Any], bool] | None,
    logger: Any,
    deque_type: type,
    /,
) -> None: ...
def bind_poll(
    ckselector_type: type | None, no_delay_limit_ms: int, client_response_type: type, /
) -> None: ...

class ClientPoll:
    """NetworkClient.poll: the common case in C, anything else the Python ``general``."""

    def __init__(self, general: Callable[..., list[Any]], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., list[Any]]: ...

class ClientPollReady:
    """NetworkClient.poll_ready: the common case in C, anything else the Python ``general``."""

    def __init__(self, general: Callable[..., list[Any]], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., list[Any]]: ...

class ClientReady:
    """NetworkClient.ready: the common case in C, anything else the Python ``general``."""

    def __init__(self, general: Callable[..., bool], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., bool]: ...

class ClientSend:
    """NetworkClient.send: the common case in C, anything else the Python ``general``."""

    def __init__(self, general: Callable[..., None], /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., None]: ...

def bind_ready(
    node_type: type,
    metadata_updater_type: type,
    connection_states_type: type,
    api_versions_type: type,
    /,
) -> None: ...
