"""NetworkClient's C paths switched on or off for a test: the C functions client.py calls
(``complete_receives``, ``write_request``, ``can_send``) and its C methods (``ready``, ``send``,
``poll``, ``poll_ready``: ``client.C_METHODS``), or the Python reference alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kclient.network import NetworkClient
from kclient.network import client as client_module

try:
    from kclient.network import _client
except ImportError:  # not built: only the reference runs
    _client = None  # type: ignore[assignment]

FUNCTIONS = ("complete_receives", "write_request", "can_send")


@contextmanager
def c_paths(c: bool) -> Iterator[None]:
    """Within: the C paths (``c``, which needs them built) or the Python ones alone."""
    saved = {name: getattr(client_module, name) for name in FUNCTIONS}
    makers: dict[str, Any] = getattr(client_module, "C_METHODS", {})
    saved_methods = {name: vars(NetworkClient)[name] for name in makers}
    for name in FUNCTIONS:
        setattr(client_module, name, getattr(_client, name) if c else None)
    for name, make in makers.items():
        python = getattr(NetworkClient, name)  # on the class: the Python function
        setattr(NetworkClient, name, make(python) if c else python)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(client_module, name, value)
        for name, value in saved_methods.items():
            setattr(NetworkClient, name, value)
