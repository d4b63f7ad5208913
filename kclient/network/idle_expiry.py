"""Least-recently-used connections for ``connections.max.idle.ms``: Kafka's ``Selector``'s
``IdleExpiryManager``.

Owned by the ``KSelector`` that uses it (its thread, or the event loop's).
"""

from __future__ import annotations

__all__ = ["IdleExpiryManager"]


class IdleExpiryManager:
    """Least-recently-used connections, for closing those idle longer than a limit."""

    __slots__ = ("_last_active_ms", "_next_check_ms", "connections_max_idle_ms")

    def __init__(self, connections_max_idle_ms: int) -> None:
        self.connections_max_idle_ms = connections_max_idle_ms
        self._last_active_ms: dict[int, int] = {}
        self._next_check_ms = 0

    def update(self, node_id: int, now_ms: int) -> None:
        self._last_active_ms.pop(node_id, None)
        self._last_active_ms[node_id] = now_ms

    def remove(self, node_id: int) -> None:
        self._last_active_ms.pop(node_id, None)

    def poll_expired(self, now_ms: int) -> int | None:
        """The least recently used node if it has been idle too long, else None."""
        if self.connections_max_idle_ms < 0 or now_ms < self._next_check_ms:
            return None
        if not self._last_active_ms:
            self._next_check_ms = now_ms + self.connections_max_idle_ms
            return None
        node_id, last_ms = next(iter(self._last_active_ms.items()))
        if now_ms - last_ms > self.connections_max_idle_ms:
            return node_id
        self._next_check_ms = last_ms + self.connections_max_idle_ms + 1
        return None
