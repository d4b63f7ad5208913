"""The controller mutation quota (KIP-599): Kafka's ``ControllerMutationQuotaManager``, its
``StrictControllerMutationQuota`` / ``PermissiveControllerMutationQuota`` and the
``TokenBucket`` they measure with.

CreateTopics, DeleteTopics (and topic auto-creation) count the partitions they create or
delete against the client's ``controller_mutation_rate`` (partitions per second). Each
client has a bucket of tokens, refilled at that rate up to a burst of
``(quota.window.num - 1) * quota.window.size.seconds * rate`` (Kafka's burst); a mutation
takes as many tokens as partitions, and may take the bucket below zero. While the bucket
is below zero the client is over its quota:

* **strict** (CreateTopics v6+, DeleteTopics v5+): a further topic is refused with
  THROTTLING_QUOTA_EXCEEDED (it is not created), and the answer says how long until the
  bucket is back at zero (``-tokens / rate`` seconds);
* **permissive** (older versions, auto-creation): the topic is created and the client is
  throttled for that long.

Called on request handler threads; one lock per manager; time comes in as ``now_ms``.
"""

from __future__ import annotations

import threading

from kclient import errors
from kclient.broker.client_quota_manager import (
    ClientQuotaMetrics,
    Sensor,
    SensorTable,
)
from kclient.broker.client_quotas import CONTROLLER_MUTATION_RATE, ClientQuotas, QuotaKey


class TokenBucket:
    """Kafka's ``TokenBucket`` stat: tokens refill at ``rate`` per second up to ``burst``."""

    __slots__ = ("last_update_ms", "tokens")

    def __init__(self, burst: float, now_ms: int) -> None:
        self.tokens = burst
        self.last_update_ms = now_ms

    def measure(self, rate: float, burst: float, now_ms: int) -> float:
        self._refill(rate, burst, now_ms)
        return self.tokens

    def record(self, value: float, rate: float, burst: float, now_ms: int) -> None:
        self._refill(rate, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, rate: float, burst: float, now_ms: int) -> None:
        elapsed_ms = max(0, now_ms - self.last_update_ms)
        self.tokens = min(burst, self.tokens + rate * elapsed_ms / 1000.0)
        self.last_update_ms = now_ms


class _Sensor(Sensor):
    """A client's sensor with its token bucket."""

    __slots__ = ("bucket",)

    def __init__(self, burst: float, num_samples: int, window_ms: int, now_ms: int) -> None:
        super().__init__(num_samples, window_ms, now_ms)
        self.bucket = TokenBucket(burst, now_ms)


class ControllerMutationQuota:
    """One request's view of its client's quota (Kafka's ``ControllerMutationQuota``)."""

    def __init__(
        self,
        manager: ControllerMutationQuotaManager | None,
        key: QuotaKey | None,
        quota: float,
        strict: bool,
    ) -> None:
        self._manager = manager
        self._key = key
        self._quota = quota
        self.strict = strict
        self._throttle_time_ms = 0
        self._recorded_ms = 0

    def record(self, partitions: int, now_ms: int) -> None:
        """Count ``partitions`` mutated. Strict and over quota: raises
        ``ThrottlingQuotaExceededError`` and nothing is counted."""
        if self._manager is None or self._key is None:
            return
        throttle_ms = self._manager.record(self._key, self._quota, partitions, self.strict, now_ms)
        if throttle_ms > 0:
            self._throttle_time_ms = throttle_ms
            self._recorded_ms = now_ms
            if self.strict:
                raise errors.ThrottlingQuotaExceededError(
                    "The throttling quota has been exceeded (the client's "
                    f"controller_mutation_rate is {self._quota:g} partitions/s; retry in "
                    f"{throttle_ms} ms)"
                )

    def throttle_time_ms(self, now_ms: int) -> int:
        """How long the client should wait, less what has passed since it was measured."""
        return max(0, self._throttle_time_ms - (now_ms - self._recorded_ms))


class ControllerMutationQuotaManager:
    """The ``controller_mutation_rate`` quotas of one broker."""

    quota_type = "ControllerMutation"

    def __init__(
        self,
        quotas: ClientQuotas,
        *,
        num_samples: int = 11,
        window_size_seconds: int = 1,
        max_sensors: int = 10_000,
    ) -> None:
        self.quotas = quotas
        self.num_samples = num_samples
        self.window_ms = window_size_seconds * 1000
        self._lock = threading.Lock()
        self._sensors: SensorTable[_Sensor] = SensorTable(max_sensors)

    def new_quota_for(self, user: str, client_id: str, strict: bool) -> ControllerMutationQuota:
        """The quota a request counts its mutations against (unbounded without one)."""
        found = self.quotas.lookup(CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return ControllerMutationQuota(None, None, 0.0, strict)
        return ControllerMutationQuota(self, found[0], found[1], strict)

    def _burst(self, quota: float) -> float:
        return (self.num_samples - 1) * self.window_ms / 1000.0 * quota

    def record(
        self, key: QuotaKey, quota: float, partitions: int, strict: bool, now_ms: int
    ) -> int:
        """Take ``partitions`` tokens (strict: only if the bucket is not below zero);
        the throttle time, 0 when within the quota."""
        burst = self._burst(quota)
        with self._lock:
            sensor = self._sensor(key, burst, now_ms)
            sensor.quota = quota
            bucket = sensor.bucket
            if strict:
                tokens = bucket.measure(quota, burst, now_ms)
                if tokens < 0:
                    return self._throttled(sensor, round(-tokens / quota * 1000))
            bucket.record(partitions, quota, burst, now_ms)
            sensor.rate.record(partitions, now_ms)
            tokens = bucket.measure(quota, burst, now_ms)
            if strict or tokens >= 0:
                return 0
            return self._throttled(sensor, round(-tokens / quota * 1000))

    @staticmethod
    def _throttled(sensor: _Sensor, throttle_ms: int) -> int:
        sensor.throttle_count += 1
        sensor.throttle_time_ms_total += throttle_ms
        return throttle_ms

    def metrics(self, now_ms: int) -> list[ClientQuotaMetrics]:
        with self._lock:
            return self._sensors.metrics(self.quota_type, now_ms)

    def _sensor(self, key: QuotaKey, burst: float, now_ms: int) -> _Sensor:
        return self._sensors.get(
            key, now_ms, lambda: _Sensor(burst, self.num_samples, self.window_ms, now_ms)
        )
