"""Client quota enforcement: Kafka's ``ClientQuotaManager`` (produce and fetch byte rates,
KIP-13), ``ClientRequestQuotaManager`` (request time, KIP-124) and the ``Rate`` /
``SampledStat`` they measure with.

Usage is measured per ``QuotaKey`` (see ``client_quotas``) over ``quota.window.num``
samples of ``quota.window.size.seconds`` each (11 x 1 s by default), exactly as Kafka's
``Rate`` over a ``WindowedSum`` does: the rate is the sum of the samples kept divided by
the time they span, taken as at least ``num - 1`` whole windows. A value is recorded
first, then the rate checked; over the quota the throttle time is the delay that brings
the rate back to the quota if nothing more is recorded,
``(rate - quota) / quota * window_ms`` (Kafka's ``QuotaUtils.throttleTime``), bounded by
one window for the request quota (as Kafka bounds it).

The request quota is a percentage of one thread's time (``request_percentage``: 100 is
one request handler thread kept busy); the time recorded is the time a request spent on
its handler thread.

Called on request handler threads; one lock per manager. Time comes in as ``now_ms``.
Sensors of clients silent for an hour are dropped (Kafka's inactive sensor expiry), and at
most ``max_sensors`` are kept (the least recently used go first), so that clients cycling
through client ids cannot grow the broker's memory.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kclient.broker.client_quotas import ClientQuotas, QuotaKey

log = logging.getLogger(__name__)

#: Kafka's ``ClientQuotaManager.InactiveSensorExpirationTimeSeconds``.
INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
#: ``ClientRequestQuotaManager.NanosToPercentagePerSecond``.
NANOS_TO_PERCENTAGE = 100.0 / 1_000_000_000


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """Kafka's ``Rate`` over a ``WindowedSum``: per-second rate of what was recorded over
    the last ``samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_samples", "num_samples", "window_ms")

    def __init__(self, num_samples: int, window_ms: int) -> None:
        self.num_samples = num_samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            # one extra sample is kept for the one overlapping the start of the window
            self._current = (self._current + 1) % (self.num_samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Per second, as Kafka's ``Rate.measure``."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is taken over: since the oldest sample's start, and at least
        ``num_samples - 1`` whole windows plus what has passed of the current one."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        oldest_ms = min(s.start_ms for s in self._samples)
        elapsed_ms = now_ms - oldest_ms
        full_windows = elapsed_ms // self.window_ms
        min_full_windows = self.num_samples - 1
        if full_windows < min_full_windows:
            elapsed_ms += (min_full_windows - full_windows) * self.window_ms
        return max(elapsed_ms, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.num_samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire_ms:
                s.reset(now_ms)


class Sensor:
    """One QuotaKey's usage and throttle times."""

    __slots__ = ("last_record_ms", "quota", "rate", "throttle_count", "throttle_time_ms_total")

    def __init__(self, num_samples: int, window_ms: int, now_ms: int) -> None:
        self.rate = SampledRate(num_samples, window_ms)
        self.quota = 0.0
        self.last_record_ms = now_ms
        self.throttle_count = 0
        self.throttle_time_ms_total = 0


@dataclass(frozen=True)
class ClientQuotaMetrics:
    """What ``ClientQuotaManager.metrics`` reports per client (Kafka's ``byte-rate`` or
    ``request-time`` and ``throttle-time`` metrics with user/client-id tags)."""

    quota_type: str  # Produce, Fetch, Request, ControllerMutation
    user: str
    client_id: str
    quota: float
    #: the measured rate (bytes/s, percent, or mutations/s)
    rate: float
    #: how often, and for how long in all, responses to it were throttled
    throttle_count: int
    throttle_time_ms_total: int

    @property
    def throttle_time_ms_avg(self) -> float:
        return self.throttle_time_ms_total / self.throttle_count if self.throttle_count else 0.0


S = TypeVar("S", bound=Sensor)


class SensorTable(Generic[S]):
    """The sensors of one quota type by ``QuotaKey``, least recently used first: a sensor
    idle for ``INACTIVE_SENSOR_EXPIRATION_MS`` goes, and at most ``max_sensors`` are kept.
    Used under its manager's lock."""

    def __init__(self, max_sensors: int) -> None:
        self.max_sensors = max_sensors
        self._by_key: collections.OrderedDict[QuotaKey, S] = collections.OrderedDict()

    def get(self, key: QuotaKey, now_ms: int, make: Callable[[], S]) -> S:
        """``key``'s sensor (``make()`` makes a missing one), marked used at ``now_ms``."""
        sensor = self._by_key.get(key)
        if sensor is None:
            self.expire(now_ms)
            sensor = self._by_key[key] = make()
            while len(self._by_key) > self.max_sensors:
                self._by_key.popitem(last=False)
        else:
            self._by_key.move_to_end(key)
        sensor.last_record_ms = now_ms
        return sensor

    def expire(self, now_ms: int) -> None:
        while self._by_key:
            oldest = next(iter(self._by_key.values()))
            if now_ms - oldest.last_record_ms < INACTIVE_SENSOR_EXPIRATION_MS:
                return
            self._by_key.popitem(last=False)

    def metrics(self, quota_type: str, now_ms: int) -> list[ClientQuotaMetrics]:
        """One ``ClientQuotaMetrics`` per live sensor."""
        self.expire(now_ms)
        return [
            ClientQuotaMetrics(
                quota_type,
                k.user,
                k.client_id,
                s.quota,
                s.rate.measure(now_ms),
                s.throttle_count,
                s.throttle_time_ms_total,
            )
            for k, s in self._by_key.items()
        ]


class ClientQuotaManager:
    """Kafka's ``ClientQuotaManager`` for one quota key (``producer_byte_rate`` ...)."""

    def __init__(
        self,
        quota_type: str,
        key: str,
        quotas: ClientQuotas,
        *,
        num_samples: int = 11,
        window_size_seconds: int = 1,
        max_throttle_time_ms: int | None = None,
        max_sensors: int = 10_000,
    ) -> None:
        self.quota_type = quota_type
        self.key = key
        self.quotas = quotas
        self.num_samples = num_samples
        self.window_ms = window_size_seconds * 1000
        self.max_throttle_time_ms = max_throttle_time_ms
        self._max_sensors = max_sensors
        self._lock = threading.Lock()
        self._sensors: SensorTable[Sensor] = SensorTable(max_sensors)
        self._lookups: dict[tuple[str, str], tuple[QuotaKey, float] | None] = {}
        self._lookups_version = -1

    @property
    def enabled(self) -> bool:
        """Whether any client may have this quota (else nothing is measured)."""
        return self.quotas.enabled(self.key)

    def quota(self, user: str, client_id: str) -> float | None:
        """The client's quota, None when unlimited."""
        found = self._lookup(user, client_id)
        return None if found is None else found[1]

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Record ``value`` for the client; the throttle time in ms if it is now over its
        quota, else 0 (Kafka's ``maybeRecordAndGetThrottleTimeMs``)."""
        found = self._lookup(user, client_id)
        if found is None:
            return 0
        quota_key, quota = found
        with self._lock:
            sensor = self._sensor(quota_key, now_ms)
            sensor.quota = quota
            sensor.rate.record(value, now_ms)
            rate = sensor.rate.measure(now_ms)
            if rate <= quota:
                return 0
            throttle_ms = round((rate - quota) / quota * sensor.rate.window_size_ms(now_ms))
        if self.max_throttle_time_ms is not None:
            throttle_ms = min(throttle_ms, self.max_throttle_time_ms)
        return max(int(throttle_ms), 0)

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Record ``value`` without checking the quota (it counts for the next requests;
        Kafka's ``recordNoThrottle``)."""
        found = self._lookup(user, client_id)
        if found is None:
            return
        with self._lock:
            self._sensor(found[0], now_ms).rate.record(value, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled Fetch sends no records)."""
        found = self._lookup(user, client_id)
        if found is None:
            return
        with self._lock:
            self._sensor(found[0], now_ms).rate.record(-value, now_ms)

    def record_throttle(
        self, user: str, client_id: str, throttle_time_ms: int, now_ms: int
    ) -> None:
        """Count a response throttled for ``throttle_time_ms`` (the throttle-time metric)."""
        found = self._lookup(user, client_id)
        if found is None or throttle_time_ms <= 0:
            return
        with self._lock:
            sensor = self._sensor(found[0], now_ms)
            sensor.throttle_count += 1
            sensor.throttle_time_ms_total += throttle_time_ms
        log.debug(
            "%s quota of user %r client %r exceeded: throttled %d ms",
            self.quota_type,
            user,
            client_id,
            throttle_time_ms,
        )

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most that may be recorded at once without certain throttling (Kafka caps a
        Fetch's bytes at this); infinite without a quota."""
        quota = self.quota(user, client_id)
        if quota is None:
            return float("inf")
        return quota * (self.num_samples - 1) * self.window_ms / 1000.0

    def metrics(self, now_ms: int) -> list[ClientQuotaMetrics]:
        with self._lock:
            return self._sensors.metrics(self.quota_type, now_ms)

    def _lookup(self, user: str, client_id: str) -> tuple[QuotaKey, float] | None:
        quotas = self.quotas
        if self._lookups_version != quotas.version or len(self._lookups) > self._max_sensors:
            self._lookups = {}
            self._lookups_version = quotas.version
        try:
            return self._lookups[(user, client_id)]
        except KeyError:
            found = self._lookups[(user, client_id)] = quotas.lookup(self.key, user, client_id)
            return found

    def _sensor(self, quota_key: QuotaKey, now_ms: int) -> Sensor:
        return self._sensors.get(
            quota_key, now_ms, lambda: Sensor(self.num_samples, self.window_ms, now_ms)
        )
