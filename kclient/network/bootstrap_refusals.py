"""Whether every bootstrap address refuses connections: the fail-fast half of the first
metadata wait. Kafka's ``NetworkClient`` has no counterpart (Java waits ``max.block.ms``
whatever the failure); aiokafka's ``start()`` fails after one round of refusals.

*Every bootstrap address refuses* means, precisely: no connection of this client has ever
become ready (ApiVersions answered), and the last connection attempt to each bootstrap
server (each entry of ``bootstrap.servers``) failed because it was refused (``connection
refused``) or its host name does not exist (``no such host``) — definite answers, unlike a
timeout or a dropped connection. ``refused_for_ms`` says for how long that has held: since
the moment the last of the bootstrap servers began its run of refusals. The producer's
first metadata wait (``send``, ``partitions_for``, ``kclient.aio``'s ``start``) gives up
once it has held for ``bootstrap.refused.timeout.ms``, raising ``BootstrapRefusedError``
with every address and its reason; until then the client keeps retrying, so a broker that
is still starting is found. The bootstrap servers here are the names that resolved
(``bootstrap_resolution``): names that never did are ``bootstrap.resolve.timeout.ms``'s,
and "no such host" counts only for a name that stopped resolving.

Written by the network client's thread; read by any thread (under a lock).
"""

from __future__ import annotations

import threading

from kclient.errors import BootstrapRefusedError

__all__ = ["REFUSALS", "BootstrapRefusals", "BootstrapRefusedError", "is_refusal"]

#: The short reasons (``connection_states.short_reason``) that count as a refusal.
REFUSALS = ("connection refused", "no such host")


def is_refusal(reason: str) -> bool:
    return reason.startswith(REFUSALS)


class BootstrapRefusals:
    """Per bootstrap node (negative ids): since when its attempts have been refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused_since_ms: dict[int, int] = {}
        self._reasons: dict[int, str] = {}  # node -> "address: reason" of its last refusal
        self.ever_connected = False

    def attempt_failed(self, node_id: int, address: str, reason: str, now_ms: int) -> None:
        if node_id >= 0 or self.ever_connected:
            return
        with self._lock:
            if is_refusal(reason):
                self._refused_since_ms.setdefault(node_id, now_ms)
                self._reasons[node_id] = f"{address}: {reason}"
            else:  # not a definite answer: its run of refusals ends
                self._refused_since_ms.pop(node_id, None)
                self._reasons.pop(node_id, None)

    def connected(self) -> None:
        """A connection became ready: from now on this client never fails fast."""
        if not self.ever_connected:
            with self._lock:
                self.ever_connected = True
                self._refused_since_ms.clear()
                self._reasons.clear()

    def refused_for_ms(self, bootstrap_ids: list[int], now_ms: int) -> int | None:
        """How long every one of ``bootstrap_ids`` has been refusing (None: not all are,
        or a connection once succeeded)."""
        if self.ever_connected or not bootstrap_ids:
            return None
        with self._lock:
            since = [self._refused_since_ms.get(node_id) for node_id in bootstrap_ids]
        if any(s is None for s in since):
            return None
        return now_ms - max(s for s in since if s is not None)

    def error(self, bootstrap_ids: list[int], refused_ms: int) -> BootstrapRefusedError:
        with self._lock:
            tried = "; ".join(self._reasons.get(n, f"node {n}: refused") for n in bootstrap_ids)
        return BootstrapRefusedError(
            f"every bootstrap server refused connections for {refused_ms} ms ({tried}); none "
            "ever accepted one. Check 'bootstrap.servers' and that the brokers are running "
            "('bootstrap.refused.timeout.ms' sets how long refusals are retried; -1 waits "
            "for 'max.block.ms')"
        )
