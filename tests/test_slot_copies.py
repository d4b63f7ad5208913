"""``kclient.slot_copies.copier``: the requests and responses of the round trip, made by
copying a template, are what their constructors make."""

from __future__ import annotations

import dataclasses

from kclient.network.kafka_client import (
    ClientRequest,
    ClientResponse,
    new_client_request,
    new_client_response,
)
from kclient.slot_copies import copier


def _fields(obj: object) -> dict[str, object]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


def test_a_copied_request_and_response_are_what_the_constructors_make() -> None:
    def callback(response: ClientResponse) -> None:
        pass

    args = (3, 0, {"acks": -1}, 1234, False, callback, 30_000, 3, 11)
    request = new_client_request(*args)
    assert type(request) is ClientRequest
    assert _fields(request) == _fields(ClientRequest(*args))
    response = new_client_response(request, {"x": 1}, 1300, 9, 77)
    assert type(response) is ClientResponse
    assert _fields(response) == _fields(ClientResponse(request, {"x": 1}, 1300, 9, 77))
    assert response.request_latency_ms == 66 and not response.disconnected
    other = new_client_response(request, None, 1, 9, 78)
    assert other.body is None and response.body == {"x": 1}  # nothing shared by accident
    other.disconnected = True
    assert not response.disconnected


def test_a_sample_with_a_mutable_member_left_unnamed_gets_its_constructor() -> None:
    sample = ClientResponse(ClientRequest(0, 0, {}, 0), {"mutable": True}, 0)
    make = copier(sample, ("request", "received_time_ms"), ClientResponse)
    assert make is ClientResponse  # the body dict would have been shared by every copy
