"""Writing a request in ``NetworkClient`` (``kclient/network/client.py``): ``RequestWrites``,
a base class of ``NetworkClient``: the version, the correlation id, the frame, the write
(``KSelector`` writes at once), then the bookkeeping (the request in flight, the DEBUG line).

Same thread contract as the client: its owning thread only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kclient import errors
from kclient.network.api_versions import api_name
from kclient.network.client_unanswered import UnansweredRequests
from kclient.network.in_flight import InFlightRequest
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.network.selector import NetworkSend
from kclient.protocol import ApiKey
from kclient.protocol.frame import encode_request

if TYPE_CHECKING:
    pass

log = logging.getLogger("kclient.network.client")


class RequestWrites(UnansweredRequests):
    """The write of a request (see the module docstring)."""

    def _do_send(
        self, request: ClientRequest, is_internal: bool, now_ms: int, version: int | None = None
    ) -> None:
        node_id = request.destination
        checked = self._checked
        if checked:
            checked.clear()  # this send changes the node's in-flight queue
        if version is None:
            api_versions = self._api_versions
            version = api_versions.usable.get(
                (node_id, request.api_key, request.min_version, request.max_version)
            )
            if version is None:
                try:
                    version = api_versions.latest_usable_version(
                        node_id, request.api_key, request.min_version, request.max_version
                    )
                except errors.UnsupportedVersionError as exc:
                    log.warning("%s%s", self._prefix, exc)
                    if not is_internal:
                        self._aborted.append(
                            ClientResponse(request, None, now_ms, version_mismatch=exc)
                        )
                    elif request.api_key == ApiKey.METADATA:
                        self.metadata_updater.handle_failed_request(now_ms, exc)
                    return
        correlation_id = self._correlation_id
        self._correlation_id = 0 if correlation_id >= 2**31 - 1 else correlation_id + 1
        body = request.body
        buffers = encode_request(
            request.api_key,
            version,
            correlation_id,
            self.client_id,
            body(version) if callable(body) else body,
        )
        send = NetworkSend(node_id, buffers, awaits_response=request.expect_response)
        # On the wire first (KSelector writes at once), bookkeeping after: only the next
        # poll reports what the send did, and by then the request is in flight.
        self._selector.send(send)
        self._sent(request, is_internal, now_ms, version, correlation_id, send)

    def _sent(  # noqa: PLR0917
        self,
        request: ClientRequest,
        is_internal: bool,
        now_ms: int,
        version: int,
        correlation_id: int,
        send: NetworkSend,
    ) -> None:
        """The bookkeeping after the write: the request is in flight."""
        node_id = request.destination
        self.in_flight_requests.add(
            InFlightRequest(  # positional (per request): destination, api key, version,
                # correlation id, send, send and creation times, timeout, the request,
                # whether it expects a response and whether the client made it itself
                node_id,
                request.api_key,
                version,
                correlation_id,
                send,
                now_ms,
                request.created_time_ms,
                request.request_timeout_ms or self.request_timeout_ms,
                request,
                request.expect_response,
                is_internal,
            )
        )
        if log.isEnabledFor(logging.DEBUG):
            self._log_sent(request, version, correlation_id, send)

    def _log_sent(
        self, request: ClientRequest, version: int, correlation_id: int, send: NetworkSend
    ) -> None:
        """The DEBUG line of a request just written (``_sent``)."""
        log.debug(
            "%ssending %s v%d to node %d (correlation id %d, %d bytes)",
            self._prefix,
            api_name(request.api_key),
            version,
            request.destination,
            correlation_id,
            send.size,
        )
