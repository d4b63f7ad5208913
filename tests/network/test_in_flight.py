"""InFlightRequests: per-node order, can_send_more, timeouts."""

from dataclasses import dataclass

import pytest

from kclient.errors import IllegalStateError
from kclient.network.in_flight import InFlightRequest, InFlightRequests
from kclient.network.kafka_client import ClientRequest


@dataclass
class FakeSend:
    completed: bool = True


def request(
    node: int, correlation_id: int, *, sent_ms: int = 0, done: bool = True
) -> InFlightRequest:
    return InFlightRequest(
        destination=node,
        api_key=0,
        api_version=9,
        correlation_id=correlation_id,
        send=FakeSend(done),
        send_time_ms=sent_ms,
        created_time_ms=sent_ms,
        request_timeout_ms=30_000,
        request=ClientRequest(node, 0, {}, sent_ms),
    )


def test_responses_complete_the_oldest_request_first() -> None:
    inflight = InFlightRequests(5)
    for cid in range(3):
        inflight.add(request(1, cid))
    assert [inflight.complete_next(1).correlation_id for _ in range(3)] == [0, 1, 2]
    assert inflight.is_empty(1)


def test_complete_last_sent_removes_the_newest() -> None:
    inflight = InFlightRequests(5)
    inflight.add(request(1, 0))
    inflight.add(request(1, 1))
    assert inflight.last_sent(1).correlation_id == 1
    assert inflight.complete_last_sent(1).correlation_id == 1
    assert inflight.in_flight_request_count(1) == 1


def test_can_send_more_needs_the_newest_send_written_completely() -> None:
    inflight = InFlightRequests(5)
    assert inflight.can_send_more(1)
    newest = request(1, 0, done=False)
    inflight.add(newest)
    assert not inflight.can_send_more(1)
    newest.send = FakeSend(True)
    assert inflight.can_send_more(1)


def test_can_send_more_stops_at_max_in_flight() -> None:
    inflight = InFlightRequests(2)
    inflight.add(request(1, 0))
    assert inflight.can_send_more(1)
    inflight.add(request(1, 1))
    assert not inflight.can_send_more(1)
    assert inflight.can_send_more(2)  # other nodes are independent
    inflight.complete_next(1)
    assert inflight.can_send_more(1)


def test_counts_per_node_and_in_total() -> None:
    inflight = InFlightRequests(5)
    inflight.add(request(1, 0))
    inflight.add(request(1, 1))
    inflight.add(request(2, 2))
    assert inflight.in_flight_request_count(1) == 2
    assert inflight.in_flight_request_count(3) == 0
    assert inflight.in_flight_request_count() == 3
    assert [r.correlation_id for r in inflight.clear_all(1)] == [0, 1]
    assert inflight.in_flight_request_count() == 1
    assert inflight.clear_all(1) == []


def test_nodes_with_timed_out_requests() -> None:
    inflight = InFlightRequests(5)
    inflight.add(request(1, 0, sent_ms=0))
    inflight.add(request(2, 1, sent_ms=10_000))
    assert inflight.nodes_with_timed_out_requests(30_000) == []
    assert inflight.nodes_with_timed_out_requests(30_001) == [1]
    assert sorted(inflight.nodes_with_timed_out_requests(40_001)) == [1, 2]
    assert inflight.next_timeout_ms(20_000) == 10_001


@pytest.mark.parametrize(
    "remove",
    [
        lambda inflight: inflight.complete_next(1),
        lambda inflight: inflight.complete_next_or_none(1),
        lambda inflight: inflight.clear_all(1),
    ],
    ids=["complete_next", "complete_next_or_none", "clear_all"],
)
def test_next_timeout_follows_the_requests_left(remove) -> None:  # type: ignore[no-untyped-def]
    # the poll timeout: a request answered no longer holds the deadline
    inflight = InFlightRequests(5)
    inflight.add(request(1, 0, sent_ms=0))  # due at 30,001
    inflight.add(request(2, 1, sent_ms=10_000))  # due at 40,001
    assert inflight.next_timeout_ms(20_000) == 10_001
    remove(inflight)
    assert inflight.next_timeout_ms(20_000) == 20_001
    inflight.complete_last_sent(2)
    assert inflight.next_timeout_ms(20_000) > 3_600_000  # nothing in flight
    inflight.add(request(2, 2, sent_ms=50_000))  # alone again: due at 80,001
    assert inflight.next_timeout_ms(60_000) == 20_001
    inflight.add(request(1, 3, sent_ms=55_000))  # due sooner: 85,001 is later, 80,001 stays
    inflight.add(request(1, 4, sent_ms=45_000))  # due at 75,001
    assert inflight.next_timeout_ms(60_000) == 15_001
    assert inflight.next_timeout_ms(90_000) == 0  # overdue


def test_completing_on_a_node_with_nothing_in_flight_is_a_bug() -> None:
    inflight = InFlightRequests(5)
    with pytest.raises(IllegalStateError, match="node 4"):
        inflight.complete_next(4)


def test_max_in_flight_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max.in.flight.requests.per.connection"):
        InFlightRequests(0)
