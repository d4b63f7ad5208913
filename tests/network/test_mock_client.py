"""MockClient: the scripted KafkaClient that Sender tests (and users) drive."""

import pytest

from kclient.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from kclient.network import ClientRequest, ClientResponse, KafkaClient, TopicPartition
from kclient.protocol import ApiKey
from kclient.testing import MockClient, MockClock, metadata_update_with

PRODUCE_RESPONSE = {"responses": [], "throttle_time_ms": 0}


@pytest.fixture
def clock() -> MockClock:
    return MockClock()


@pytest.fixture
def client(clock: MockClock) -> MockClient:
    return MockClient(clock, metadata_update_with(2, {"t": 2}))


def produce(
    clock: MockClock, node: int, done: list[ClientResponse], **kwargs: object
) -> ClientRequest:
    return ClientRequest(
        node, ApiKey.PRODUCE, {"acks": -1}, clock.monotonic_ms(), callback=done.append, **kwargs
    )  # type: ignore[arg-type]


def test_it_is_a_kafka_client(client: MockClient) -> None:
    as_protocol: KafkaClient = client
    assert as_protocol.metadata.fetch().leader_for(TopicPartition("t", 1)) is not None


def test_a_prepared_response_answers_the_next_matching_request(
    client: MockClient, clock: MockClock
) -> None:
    done: list[ClientResponse] = []
    node = client.metadata.fetch().nodes[0]
    assert client.ready(node, clock.monotonic_ms())
    client.prepare_response(
        PRODUCE_RESPONSE, api_key=ApiKey.PRODUCE, matcher=lambda b: b["acks"] == -1
    )
    request = produce(clock, node.id, done)
    client.send(request, clock.monotonic_ms())
    assert not client.requests  # answered at once, nothing left in flight
    [response] = client.poll(0, clock.monotonic_ms())
    assert response.request is request and response.body == PRODUCE_RESPONSE
    assert done == [response]


def test_a_matcher_that_rejects_the_request_fails_the_send(
    client: MockClient, clock: MockClock
) -> None:
    node = client.metadata.fetch().nodes[0]
    client.ready(node, clock.monotonic_ms())
    client.prepare_response(PRODUCE_RESPONSE, matcher=lambda b: b["acks"] == 0)
    with pytest.raises(IllegalStateError, match="matcher rejected"):
        client.send(produce(clock, node.id, []), clock.monotonic_ms())


def test_prepared_responses_for_another_node_wait_for_that_node(
    client: MockClient, clock: MockClock
) -> None:
    now = clock.monotonic_ms()
    n0, n1 = client.metadata.fetch().nodes
    client.ready(n0, now)
    client.ready(n1, now)
    client.prepare_response(PRODUCE_RESPONSE, node=n1)
    client.send(produce(clock, n0.id, []), now)
    assert client.in_flight_request_count(n0.id) == 1
    client.send(produce(clock, n1.id, []), now)
    assert client.in_flight_request_count(n1.id) == 0
    assert len(client.poll(0, now)) == 1


def test_respond_answers_the_oldest_in_flight_request(client: MockClient, clock: MockClock) -> None:
    now = clock.monotonic_ms()
    node = client.metadata.fetch().nodes[0]
    client.ready(node, now)
    first = produce(clock, node.id, [])
    client.send(first, now)
    client.send(produce(clock, node.id, []), now)
    assert client.respond(PRODUCE_RESPONSE) is first
    [response] = client.poll(0, now)
    assert response.request is first
    assert client.in_flight_request_count() == 1


def test_disconnect_fails_in_flight_requests_and_the_node_must_reconnect(
    client: MockClient, clock: MockClock
) -> None:
    now = clock.monotonic_ms()
    node = client.metadata.fetch().nodes[0]
    client.ready(node, now)
    client.send(produce(clock, node.id, []), now)
    client.disconnect(node.id)
    [response] = client.poll(0, now)
    assert response.disconnected and isinstance(response.error, KafkaConnectionError)
    assert not client.is_ready(node, now)
    assert client.ready(node, now)  # reconnects


def test_a_prepared_disconnect(client: MockClient, clock: MockClock) -> None:
    now = clock.monotonic_ms()
    node = client.metadata.fetch().nodes[0]
    client.ready(node, now)
    client.prepare_response(None, disconnected=True)
    client.send(produce(clock, node.id, []), now)
    [response] = client.poll(0, now)
    assert response.disconnected


def test_blackout_keeps_a_node_unready_for_its_duration(
    client: MockClient, clock: MockClock
) -> None:
    node = client.metadata.fetch().nodes[1]
    client.blackout(node, 300)
    assert not client.ready(node, clock.monotonic_ms())
    assert client.connection_delay(node, clock.monotonic_ms()) == 300
    assert client.connection_failed(node)
    clock.advance(300)
    assert client.ready(node, clock.monotonic_ms())


def test_an_unreachable_node_backs_off_after_each_attempt(
    client: MockClient, clock: MockClock
) -> None:
    node = client.metadata.fetch().nodes[1]
    client.set_unreachable(node, 1000)
    assert not client.ready(node, clock.monotonic_ms())
    assert client.connection_delay(node, clock.monotonic_ms()) == 100
    clock.advance(1000)
    assert client.ready(node, clock.monotonic_ms())


def test_an_unreachable_node_shows_in_the_no_broker_reachable_error(
    client: MockClient, clock: MockClock
) -> None:
    node = client.metadata.fetch().nodes[1]
    client.set_unreachable(node, 60_000, reason="no such host")
    client.ready(node, clock.monotonic_ms())
    error = client.no_broker_reachable_error(60_000)
    assert isinstance(error, KafkaTimeoutError)
    assert "localhost:9093: no such host" in str(error)


def test_delay_ready_and_throttle(client: MockClient, clock: MockClock) -> None:
    node = client.metadata.fetch().nodes[0]
    client.delay_ready(node, 50)
    assert not client.ready(node, clock.monotonic_ms())
    clock.advance(50)
    assert client.ready(node, clock.monotonic_ms())
    client.throttle(node, 200)
    assert not client.is_ready(node, clock.monotonic_ms())
    assert client.poll_delay_ms(node, clock.monotonic_ms()) == 200


def test_requests_past_their_timeout_are_timed_out_by_poll(
    client: MockClient, clock: MockClock
) -> None:
    node = client.metadata.fetch().nodes[0]
    client.ready(node, clock.monotonic_ms())
    client.send(produce(clock, node.id, [], request_timeout_ms=1000), clock.monotonic_ms())
    clock.advance(1000)
    [response] = client.poll(0, clock.monotonic_ms())
    assert response.timed_out and isinstance(response.error, KafkaTimeoutError)


def test_a_request_with_no_response_expected_completes_at_once(
    client: MockClient, clock: MockClock
) -> None:
    node = client.metadata.fetch().nodes[0]
    client.ready(node, clock.monotonic_ms())
    client.send(produce(clock, node.id, [], expect_response=False), clock.monotonic_ms())
    [response] = client.poll(0, clock.monotonic_ms())
    assert response.body is None and not response.disconnected


def test_a_scripted_version_mismatch(client: MockClient, clock: MockClock) -> None:
    node = client.metadata.fetch().nodes[0]
    client.ready(node, clock.monotonic_ms())
    client.prepare_response(None, version_mismatch=True)
    client.send(produce(clock, node.id, []), clock.monotonic_ms())
    [response] = client.poll(0, clock.monotonic_ms())
    assert response.version_mismatch is not None


def test_a_requested_metadata_update_applies_the_prepared_body(
    client: MockClient, clock: MockClock
) -> None:
    client.prepare_metadata_update(metadata_update_with(2, {"t": 2}, leaders={("t", 0): 1}))
    clock.advance(100)
    client.metadata.request_update()
    client.poll(0, clock.monotonic_ms())
    leader = client.metadata.fetch().leader_for(TopicPartition("t", 0))
    assert leader is not None and leader.id == 1
    assert not client.metadata.update_requested()


def test_sending_to_a_node_that_is_not_ready_is_refused(
    client: MockClient, clock: MockClock
) -> None:
    with pytest.raises(IllegalStateError, match="not ready"):
        client.send(produce(clock, 0, []), clock.monotonic_ms())
