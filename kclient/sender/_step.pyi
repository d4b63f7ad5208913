"""Type stub of the C extension ``_step.c`` (see kclient.sender.sender)."""

from typing import Any

def send_data(sender: Any, now_ms: int, /) -> int: ...
