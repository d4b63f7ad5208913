"""Throttled connections of one Processor: Kafka's ``ThrottledChannel`` and the throttling
half of its ``ChannelMuteState`` (KIP-219).

A response whose request went over a quota carries ``throttle_time_ms``. A client that
honours it (``client_throttles``: the request versions of KIP-219 and later, e.g.
Produce v6+, Fetch v8+, Metadata v6+) gets the response at once and waits by itself; the
broker keeps its connection muted for the throttle time anyway, so one that does not
wait cannot send more meanwhile. An older request version's response is held back for
the throttle time (the connection muted meanwhile), which is how such clients were
throttled before KIP-219. Either way the connection is read again only once its response
is sent and its throttle time is over.

Owned by one Processor thread (no lock); times are ``now_ns`` of its monotonic clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from kclient.protocol import ApiKey

_T = TypeVar("_T")

#: api key -> the first request version whose client throttles itself (Kafka's
#: ``AbstractResponse.shouldClientThrottle``); an api not listed never does.
CLIENT_THROTTLES_FROM: Mapping[int, int] = MappingProxyType(
    {
        ApiKey.PRODUCE: 6,
        ApiKey.FETCH: 8,
        ApiKey.LIST_OFFSETS: 3,
        ApiKey.METADATA: 6,
        ApiKey.OFFSET_COMMIT: 4,
        ApiKey.OFFSET_FETCH: 4,
        ApiKey.FIND_COORDINATOR: 2,
        ApiKey.JOIN_GROUP: 3,
        ApiKey.HEARTBEAT: 2,
        ApiKey.LEAVE_GROUP: 2,
        ApiKey.SYNC_GROUP: 2,
        ApiKey.DESCRIBE_GROUPS: 2,
        ApiKey.LIST_GROUPS: 2,
        ApiKey.API_VERSIONS: 2,
        ApiKey.CREATE_TOPICS: 3,
        ApiKey.DELETE_TOPICS: 2,
        ApiKey.CREATE_PARTITIONS: 1,
        ApiKey.DESCRIBE_CONFIGS: 2,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
        ApiKey.INIT_PRODUCER_ID: 1,
        ApiKey.ADD_PARTITIONS_TO_TXN: 1,
        ApiKey.ADD_OFFSETS_TO_TXN: 1,
        ApiKey.END_TXN: 1,
        ApiKey.TXN_OFFSET_COMMIT: 1,
        ApiKey.DELETE_GROUPS: 1,
        ApiKey.OFFSET_DELETE: 0,
    }
)


def client_throttles(api_key: int, api_version: int) -> bool:
    """Whether a client sending this request version honours ``throttle_time_ms``."""
    first = CLIENT_THROTTLES_FROM.get(api_key)
    return first is not None and api_version >= first


class ThrottledChannels(Generic[_T]):
    """Connections muted for their throttle time, and responses held back until then."""

    def __init__(self) -> None:
        #: connection -> when its throttle time ends
        self._until_ns: dict[str, int] = {}
        #: connection -> the response held back for it (old request versions)
        self._held: dict[str, _T] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._until_ns)

    def throttle(self, connection_id: str, now_ns: int, throttle_time_ms: int) -> None:
        """Keep ``connection_id`` muted for ``throttle_time_ms`` from now."""
        until_ns = now_ns + throttle_time_ms * 1_000_000
        if until_ns <= self._until_ns.get(connection_id, 0):
            return
        self._until_ns[connection_id] = until_ns
        heapq.heappush(self._heap, (until_ns, next(self._seq), connection_id))

    def hold(self, connection_id: str, now_ns: int, throttle_time_ms: int, response: _T) -> None:
        """Throttle the connection and send ``response`` only when that is over."""
        self.throttle(connection_id, now_ns, throttle_time_ms)
        self._held[connection_id] = response

    def is_throttled(self, connection_id: str, now_ns: int) -> bool:
        until_ns = self._until_ns.get(connection_id)
        return until_ns is not None and until_ns > now_ns

    def pop_due(self, now_ns: int) -> list[tuple[str, _T | None]]:
        """Connections whose throttle time is over, each with its held response (or
        None: unmute it once its response is sent)."""
        due: list[tuple[str, _T | None]] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ns:
            until_ns, _, connection_id = heapq.heappop(heap)
            if self._until_ns.get(connection_id) != until_ns:
                continue  # extended since, or forgotten
            del self._until_ns[connection_id]
            due.append((connection_id, self._held.pop(connection_id, None)))
        return due

    def timeout_s(self, now_ns: int, timeout_s: float) -> float:
        """``timeout_s``, shortened to wake up when the next throttle time ends."""
        if not self._heap:
            return timeout_s
        return max(0.0, min(timeout_s, (self._heap[0][0] - now_ns) / 1e9))

    def forget(self, connection_id: str) -> _T | None:
        """The connection closed: drop its throttle; returns a response held for it."""
        self._until_ns.pop(connection_id, None)
        return self._held.pop(connection_id, None)
