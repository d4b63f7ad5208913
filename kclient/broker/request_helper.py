"""How long to throttle a client after its request: Kafka's ``RequestHandlerHelper`` (the
quota half of it) over the broker's ``QuotaManagers``.

Every answered request counts against its client's request quota (the time it took on
its handler thread, as a percentage of one thread's second); a Produce also against its
producer byte rate (the request's size; acks=0 Produce is exempt from the request quota,
as in Kafka), a Fetch against its consumer byte rate (the records it would return; when
throttled it returns none and the bytes are taken back, as in Kafka). When both quotas
are exceeded the longer throttle time applies. The result goes on the request
(``Request.throttle_time_ms``), into the response body, and to the Processor, which keeps
the connection muted that long (``throttled_channel``).

Called on request handler threads (and on whichever thread completes a parked Fetch).
"""

from __future__ import annotations

from kclient.broker.client_quota_manager import NANOS_TO_PERCENTAGE, ClientQuotaManager
from kclient.broker.controller_mutation_quota import ControllerMutationQuota
from kclient.broker.quota_factory import QuotaManagers
from kclient.broker.request_channel import Request


def _client_id(request: Request) -> str:
    return request.header.client_id or ""


class RequestHandlerHelper:
    """Throttle times of requests for one broker (no quotas: always 0)."""

    def __init__(self, managers: QuotaManagers | None) -> None:
        self.managers = managers

    def request_throttle_time_ms(self, request: Request, now_ns: int) -> int:
        """Record the request's handler time; its request-quota throttle time."""
        if self.managers is None:
            return 0
        manager = self.managers.request
        if not manager.enabled:
            return 0
        end_ns = request.api_local_complete_time_ns
        if end_ns < 0:
            end_ns = now_ns
        start_ns = request.request_dequeue_time_ns
        thread_ns = max(end_ns - start_ns, 0) if start_ns >= 0 else 0
        # the network thread's time counts too (Kafka's request time): reading it now,
        # sending its answer once that is done (without throttling this one)
        thread_ns += request.network_thread_time_ns
        user, client_id = request.principal, _client_id(request)

        def record_network_thread_time(elapsed_ns: int, at_ns: int) -> None:
            manager.record_no_throttle(
                user, client_id, elapsed_ns * NANOS_TO_PERCENTAGE, at_ns // 1_000_000
            )

        request.record_network_thread_time = record_network_thread_time
        return manager.record_and_get_throttle_time_ms(
            user, client_id, thread_ns * NANOS_TO_PERCENTAGE, now_ns // 1_000_000
        )

    def finish(self, request: Request, now_ns: int) -> int:
        """The request's throttle time: as decided by its handler, else the request
        quota's. Sets ``request.throttle_time_ms``."""
        if request.throttle_time_ms < 0:
            throttle_ms = self.request_throttle_time_ms(request, now_ns)
            self._apply(request, now_ns, (self._request_manager(), throttle_ms))
        return request.throttle_time_ms

    def produce_throttle_time_ms(self, request: Request, acks: int, now_ns: int) -> int:
        """Record a Produce request's bytes (and, unless acks=0, its time); sets and
        returns its throttle time."""
        if self.managers is None:
            request.throttle_time_ms = 0
            return 0
        produce = self.managers.produce
        bandwidth_ms = (
            produce.record_and_get_throttle_time_ms(
                request.principal, _client_id(request), request.size_bytes, now_ns // 1_000_000
            )
            if produce.enabled
            else 0
        )
        request_ms = 0 if acks == 0 else self.request_throttle_time_ms(request, now_ns)
        return self._apply(
            request, now_ns, (produce, bandwidth_ms), (self.managers.request, request_ms)
        )

    def controller_mutation_quota(
        self, request: Request, strict_since_version: int
    ) -> ControllerMutationQuota:
        """The quota CreateTopics/DeleteTopics count partitions against: strict from
        ``strict_since_version`` on (refuses a topic over it), permissive before."""
        strict = request.header.api_version >= strict_since_version
        if self.managers is None:
            return ControllerMutationQuota(None, None, 0.0, strict)
        return self.managers.controller_mutation.new_quota_for(
            request.principal, _client_id(request), strict
        )

    def controller_throttle_time_ms(
        self, request: Request, quota: ControllerMutationQuota, now_ns: int
    ) -> int:
        """The throttle time of a CreateTopics/DeleteTopics answer: the longer of its
        mutation quota's and its request quota's; sets it on the request."""
        request_ms = self.request_throttle_time_ms(request, now_ns)
        mutation_ms = quota.throttle_time_ms(now_ns // 1_000_000)
        if mutation_ms > request_ms:
            request.throttle_time_ms = mutation_ms  # counted by the mutation quota itself
            return mutation_ms
        return self._apply(request, now_ns, (self._request_manager(), request_ms))

    def fetch_max_bytes(self, request: Request) -> float:
        """The most a Fetch may return without being throttled for sure (Kafka caps
        ``fetch.max.bytes`` with it); infinite without a consumer byte-rate quota."""
        if self.managers is None or not self.managers.fetch.enabled:
            return float("inf")
        return self.managers.fetch.max_value_in_quota_window(request.principal, _client_id(request))

    def fetch_throttle_time_ms(self, request: Request, response_bytes: int, now_ns: int) -> int:
        """Record a Fetch's time and the bytes it would return; sets and returns its
        throttle time. When it is throttled, the bytes are taken back: the caller then
        answers without records."""
        if self.managers is None:
            request.throttle_time_ms = 0
            return 0
        now_ms = now_ns // 1_000_000
        request_ms = self.request_throttle_time_ms(request, now_ns)
        fetch = self.managers.fetch
        user, client_id = request.principal, _client_id(request)
        bandwidth_ms = 0
        if fetch.enabled:
            bandwidth_ms = fetch.record_and_get_throttle_time_ms(
                user, client_id, response_bytes, now_ms
            )
            if max(bandwidth_ms, request_ms) > 0:
                fetch.unrecord(user, client_id, response_bytes, now_ms)
        return self._apply(
            request, now_ns, (fetch, bandwidth_ms), (self.managers.request, request_ms)
        )

    def _request_manager(self) -> ClientQuotaManager | None:
        return self.managers.request if self.managers is not None else None

    @staticmethod
    def _apply(
        request: Request, now_ns: int, *candidates: tuple[ClientQuotaManager | None, int]
    ) -> int:
        """The longest throttle time wins; its manager counts it (throttle-time metric)."""
        manager, throttle_ms = max(candidates, key=lambda c: c[1])
        request.throttle_time_ms = throttle_ms
        if throttle_ms > 0 and manager is not None:
            manager.record_throttle(
                request.principal, _client_id(request), throttle_ms, now_ns // 1_000_000
            )
        return throttle_ms
