"""Type stub of the C extension ``_step.c`` (see kclient.sender.sender)."""

import logging
from collections.abc import Callable
from typing import Any

def send_data(sender: Any, now_ms: int, /) -> int: ...
def configure(
    new_client_request: Callable[..., Any],
    produce_api_key: int,
    produce_min_version: int,
    produce_max_version: int,
    log: logging.Logger,
    debug_level: int,
    sender_type: type[Any],
    accumulator_type: type[Any],
    batch_type: type[Any],
    /,
) -> None: ...

class RunOnceMethod:
    def __init__(self, general: Any, /) -> None: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any: ...
    def __call__(self, *args: Any) -> Any: ...

class PollNetworkMethod(RunOnceMethod): ...
