"""Requests that expect no response (acks=0 Produce) in ``NetworkClient``
(``kclient/network/client.py``): ``UnansweredRequests``, a base class of ``NetworkClient``
(after ``ClientNodes``).

Such a request completes when the selector reports it written. Its correlation id is kept
(the last 256 per node) because some Kafka-compatible brokers answer it anyway: that answer
is dropped rather than matched against the next request in flight (a mismatch, which closes
the connection). A node's ids are forgotten when it disconnects. Same thread contract as the
client: its owning thread only.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from kclient import errors
from kclient.network.client_nodes import ClientNodes
from kclient.protocol.frame import peek_correlation_id

if TYPE_CHECKING:
    from kclient.network.kafka_client import ClientResponse

log = logging.getLogger("kclient.network.client")


class UnansweredRequests(ClientNodes):
    """The acks=0 bookkeeping of ``NetworkClient`` (see the module docstring)."""

    def _handle_completed_sends(self, responses: list[ClientResponse], now_ms: int) -> None:
        for send in self._selector.completed_sends:
            if send.awaits_response or self.in_flight_requests.is_empty(send.destination):
                continue
            request = self.in_flight_requests.last_sent(send.destination)
            if not request.expect_response:
                self.in_flight_requests.complete_last_sent(send.destination)
                unanswered = self._unanswered.get(send.destination)
                if unanswered is None:
                    unanswered = self._unanswered[send.destination] = deque(maxlen=256)
                unanswered.append(request.correlation_id)
                responses.append(request.completed(None, now_ms))

    def _is_answer_to_unanswered(self, node_id: int, payload: Any) -> bool:
        """True for a response to a request sent as expecting none (e.g. acks=0 Produce).

        Kafka never answers those, but some Kafka-compatible brokers do; the answer carries
        nothing the caller waits for, so it is dropped instead of closing the connection.
        """
        unanswered = self._unanswered.get(node_id)
        if not unanswered:
            return False
        try:
            correlation_id = peek_correlation_id(payload)
        except errors.ProtocolDecodeError:
            return False
        if correlation_id not in unanswered:
            return False
        unanswered.remove(correlation_id)
        log.debug(
            "%snode %d answered request %d, which expected no response; ignored",
            self._prefix,
            node_id,
            correlation_id,
        )
        return True
