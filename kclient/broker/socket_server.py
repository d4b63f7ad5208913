"""SocketServer: the network layer of one embedded broker (Kafka's ``SocketServer``).

One Acceptor thread (``acceptor``) and ``num.network.threads`` Processor threads
(``processor``: parsing, muting, throttled connections, TLS and SASL), over one
RequestChannel and one ``MemoryPool`` (``queued.max.request.bytes``). Started and shut
down from the caller's thread (``KafkaServer``).
"""

from __future__ import annotations

import ssl

from kclient.broker.acceptor import Acceptor
from kclient.broker.faults import LostAnswers
from kclient.broker.metrics import BrokerMetrics
from kclient.broker.network_receive import MemoryPool
from kclient.broker.processor import Processor
from kclient.broker.request_channel import RequestChannel
from kclient.broker.sasl_server import SaslServer

__all__ = ["Acceptor", "Processor", "SocketServer"]


class SocketServer:
    """The network layer of one broker: an Acceptor and its Processors (TLS connections
    when given an ``ssl_context``, SASL authentication when given a ``sasl_server``)."""

    def __init__(
        self,
        host: str,
        port: int,
        request_channel: RequestChannel,
        *,
        num_network_threads: int,
        max_request_bytes: int,
        connections_max_idle_ms: int = 600_000,
        queued_max_request_bytes: int = -1,
        max_request_items: int | None = None,
        metrics: BrokerMetrics | None = None,
        name_prefix: str = "kclient-broker",
        ssl_context: ssl.SSLContext | None = None,
        sasl_server: SaslServer | None = None,
        lost_answers: LostAnswers | None = None,
    ) -> None:
        #: ``queued.max.request.bytes``: request bytes held by all Processors together
        self.memory_pool = MemoryPool(queued_max_request_bytes)
        self.processors = [
            Processor(
                i,
                request_channel,
                max_request_bytes=max_request_bytes,
                connections_max_idle_ms=connections_max_idle_ms,
                memory_pool=self.memory_pool,
                max_request_items=max_request_items,
                metrics=metrics,
                name_prefix=name_prefix,
                ssl_context=ssl_context,
                sasl_server=sasl_server,
                lost_answers=lost_answers,
            )
            for i in range(num_network_threads)
        ]
        try:
            self.acceptor = Acceptor(host, port, self.processors, name_prefix=name_prefix)
        except OSError:
            for p in self.processors:
                p.close()
            raise
        self.host = host
        self.port = self.acceptor.port

    def start(self) -> None:
        for p in self.processors:
            p.start()
        self.acceptor.start()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, close every connection, join the threads."""
        self.acceptor.initiate_shutdown()
        for p in self.processors:
            p.initiate_shutdown()
        self.acceptor.await_shutdown(timeout_s)
        for p in self.processors:
            p.await_shutdown(timeout_s)

    @property
    def connection_count(self) -> int:
        return sum(p.connection_count for p in self.processors)
