"""Blocking helpers over a ``NetworkClient``: Kafka's ``NetworkClientUtils``.

Each runs the poll loop itself, so call them only from the thread that owns the client
(the producer's Sender thread, or a tool/test that has no Sender). They read the clock
at the top of each loop iteration and stop at ``timeout_ms``; at that deadline the error
names every address tried and the last OS error for each when no broker ever answered.
"""

from __future__ import annotations

from collections.abc import Callable

from kclient.clock import Clock
from kclient.errors import KafkaTimeoutError
from kclient.network.client import NetworkClient
from kclient.network.cluster import Cluster
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.network.metadata import Node

_POLL_SLICE_MS = 100


def await_ready(client: NetworkClient, node: Node, clock: Clock, timeout_ms: int) -> None:
    """Block until ``client.ready(node)``; KafkaTimeoutError after ``timeout_ms``."""
    start_ms = clock.monotonic_ms()
    now_ms = start_ms
    while not client.ready(node, now_ms):
        if now_ms - start_ms >= timeout_ms:
            failures = client.connection_failures()
            reason = failures.get(node.address) or next(
                (why for address, why in failures.items() if address.startswith(node.address)),
                "no connection attempt finished",
            )
            raise KafkaTimeoutError(
                f"node {node.id} at {node.address} not ready after {timeout_ms} ms ({reason})"
            )
        client.poll(min(_POLL_SLICE_MS, timeout_ms - (now_ms - start_ms)), now_ms)
        now_ms = clock.monotonic_ms()


def send_and_receive(client: NetworkClient, request: ClientRequest, clock: Clock) -> ClientResponse:
    """Send to a ready node and poll until that request completes (in any way)."""
    client.send(request, clock.monotonic_ms())
    while True:
        for response in client.poll(_POLL_SLICE_MS, clock.monotonic_ms()):
            if response.request is request:
                return response


def await_metadata(
    client: NetworkClient,
    clock: Clock,
    timeout_ms: int,
    until: Callable[[Cluster], bool] | None = None,
) -> Cluster:
    """Poll until the cluster metadata came from a broker (and ``until(cluster)`` holds).

    At the deadline raises ``client.no_broker_reachable_error`` if no broker ever
    answered, else a KafkaTimeoutError naming what was awaited.
    """
    start_ms = clock.monotonic_ms()
    now_ms = start_ms
    while True:
        cluster = client.metadata.fetch()
        if not cluster.is_bootstrap_configured and cluster.nodes:
            if until is None or until(cluster):
                return cluster
        elif now_ms - start_ms >= timeout_ms:
            raise client.no_broker_reachable_error(now_ms - start_ms)
        if now_ms - start_ms >= timeout_ms:
            raise KafkaTimeoutError(
                f"cluster metadata did not reach the awaited state within {timeout_ms} ms "
                f"(last: {cluster!r})"
            )
        client.poll(min(_POLL_SLICE_MS, timeout_ms - (now_ms - start_ms)), now_ms)
        now_ms = clock.monotonic_ms()
