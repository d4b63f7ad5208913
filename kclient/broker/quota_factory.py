"""The quota managers of one broker: Kafka's ``QuotaFactory.QuotaManagers``.

Built once per broker (``KafkaServer``) over the cluster's ``ClientQuotas``; kept across a
restart of that broker, so that usage measured before still counts. Thread-safe (each
manager has its own lock).
"""

from __future__ import annotations

from kclient.broker.client_quota_manager import ClientQuotaManager, ClientQuotaMetrics
from kclient.broker.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
)
from kclient.broker.controller_mutation_quota import ControllerMutationQuotaManager


class QuotaManagers:
    """The quota managers of one broker (Kafka's ``QuotaFactory.QuotaManagers``)."""

    def __init__(
        self, quotas: ClientQuotas, *, num_samples: int = 11, window_size_seconds: int = 1
    ) -> None:
        self.quotas = quotas
        self.produce = ClientQuotaManager(
            "Produce",
            PRODUCER_BYTE_RATE,
            quotas,
            num_samples=num_samples,
            window_size_seconds=window_size_seconds,
        )
        self.fetch = ClientQuotaManager(
            "Fetch",
            CONSUMER_BYTE_RATE,
            quotas,
            num_samples=num_samples,
            window_size_seconds=window_size_seconds,
        )
        self.request = ClientQuotaManager(
            "Request",
            REQUEST_PERCENTAGE,
            quotas,
            num_samples=num_samples,
            window_size_seconds=window_size_seconds,
            max_throttle_time_ms=window_size_seconds * 1000,
        )
        self.controller_mutation = ControllerMutationQuotaManager(
            quotas, num_samples=num_samples, window_size_seconds=window_size_seconds
        )

    def metrics(self, now_ms: int) -> list[ClientQuotaMetrics]:
        """Every client's quota metrics, of every quota type."""
        out: list[ClientQuotaMetrics] = []
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation):
            out.extend(manager.metrics(now_ms))
        return out
