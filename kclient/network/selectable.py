"""The selector seam: Kafka's ``Selectable``, what ``NetworkClient`` needs of a selector.

``KSelector`` (``kclient.network.selector``) implements it over sockets, ``MockSelector``
(``kclient.testing``) in memory. Owned by the thread that drives the ``NetworkClient``.
"""

from __future__ import annotations

import threading
from typing import Protocol

from kclient.errors import KafkaError
from kclient.network.channel import NetworkReceive, NetworkSend

__all__ = ["Selectable"]


class Selectable(Protocol):
    """The selector seam (Java's ``Selectable``): ``KSelector``, or ``MockSelector`` in tests."""

    completed_sends: list[NetworkSend]
    completed_receives: list[NetworkReceive]
    connected: list[int]
    disconnected: dict[int, KafkaError]
    release_before_select: list[threading.Lock]
    """Locks that threads waiting on completed work block on: the next ``poll`` releases
    them (and empties the list) just before it waits for I/O, so a woken thread finds the
    GIL free instead of waking once for its lock and again for the GIL."""

    def connect(
        self,
        node_id: int,
        host: str,
        port: int,
        family: int | None = None,
        server_hostname: str | None = None,
    ) -> None:
        """Start a non-blocking connection to an IP address (``family`` inferred when None).
        ``server_hostname`` is the broker's advertised name, which TLS verifies.
        Raises ``KafkaConnectionError`` if it fails at once."""
        ...

    def send(self, send: NetworkSend) -> None:
        """Queue a send on its node's channel; written by the following polls."""
        ...

    def poll(self, timeout_ms: int) -> None:
        """Do I/O, waiting up to ``timeout_ms`` for some; refills the result lists."""
        ...

    def mute(self, node_id: int) -> None: ...
    def unmute(self, node_id: int) -> None: ...
    def is_channel_ready(self, node_id: int) -> bool: ...
    def wakeup(self) -> None:
        """Interrupt a blocked ``poll``. Safe to call from any thread."""
        ...

    def close(self, node_id: int | None = None) -> None:
        """Close one node's connection (not reported in ``disconnected``), or all when None."""
        ...
