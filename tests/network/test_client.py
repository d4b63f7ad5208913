"""NetworkClient driven by MockSelector + MockClock: no sockets, no sleeps."""

import gc
import logging
import random
import socket
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from kclient import errors
from kclient.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from kclient.network import (
    ClientRequest,
    ClientResponse,
    Metadata,
    NetworkClient,
    NetworkClientConfig,
    Node,
    TopicPartition,
)
from kclient.network.connection_states import Address
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.testing import MockClock, MockSelector, api_versions_body, metadata_update_with
from kclient.testing.selector import SentRequest, response_payload

METADATA_BODY = {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}


def resolve_to_ip(host: str, port: int) -> list[Address]:
    return [(socket.AF_INET, "10.0.0.1", port)]


@dataclass
class Env:
    clock: MockClock
    selector: MockSelector
    metadata: Metadata
    client: NetworkClient
    done: list[ClientResponse] = field(default_factory=list)

    @property
    def now(self) -> int:
        return self.clock.monotonic_ms()

    def node(self, node_id: int) -> Node:
        node = self.metadata.fetch().node_by_id(node_id)
        assert node is not None
        return node

    def poll(self, timeout_ms: int = 0) -> list[ClientResponse]:
        return self.client.poll(timeout_ms, self.now)

    def connect(self, node_id: int) -> Node:
        node = self.node(node_id)
        for _ in range(5):
            if self.client.ready(node, self.now):
                return node
            self.poll()
        raise AssertionError(f"node {node_id} never became ready")

    def request(self, node_id: int, **kwargs: object) -> ClientRequest:
        return ClientRequest(
            node_id, ApiKey.METADATA, METADATA_BODY, self.now, callback=self.done.append, **kwargs
        )  # type: ignore[arg-type]

    def send(self, node_id: int, **kwargs: object) -> ClientRequest:
        request = self.request(node_id, **kwargs)
        self.client.send(request, self.now)
        return request


def make_env(
    *,
    num_nodes: int = 3,
    api_versions: dict[int, tuple[int, int]] | None = None,
    config: NetworkClientConfig | None = None,
    resolver: Callable[[str, int], list[Address]] = resolve_to_ip,
    bootstrap_only: list[tuple[str, int]] | None = None,
) -> Env:
    clock = MockClock()
    selector = MockSelector()
    versions = api_versions_body(api_versions)
    selector.serve(ApiKey.API_VERSIONS, lambda request: versions)
    md = Metadata()
    if bootstrap_only is not None:
        md.bootstrap(bootstrap_only)
    else:
        md.add("t", clock.monotonic_ms())
        wanted = md.new_metadata_request(clock.monotonic_ms())
        body = metadata_update_with(num_nodes, {"t": 3})
        md.update(wanted.request_version, body, False, clock.monotonic_ms())
    client = NetworkClient(
        selector, md, config, clock=clock, rng=random.Random(3), resolver=resolver
    )
    return Env(clock, selector, md, client)


@pytest.fixture
def env() -> Env:
    return make_env()


def metadata_response_for(request: SentRequest) -> dict[str, object]:
    return metadata_update_with(3, {"t": 3})


# ---- connecting and ApiVersions ----------------------------------------------------


def test_ready_starts_a_connection_and_api_versions_go_first(env: Env) -> None:
    node = env.node(1)
    assert not env.client.ready(node, env.now)
    assert env.selector.connect_attempts == [(1, "10.0.0.1", 9093)]
    env.poll()  # connected → ApiVersions queued
    env.poll()  # ApiVersions written and answered
    first = env.selector.requests(node_id=1)[0]
    assert first.api_key == ApiKey.API_VERSIONS
    assert first.api_version == SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
    assert first.body["client_software_name"] == "kclient"
    assert env.client.ready(node, env.now)
    assert env.client.api_versions(1) is not None


def test_requests_use_the_highest_version_both_sides_support() -> None:
    env = make_env(api_versions={**SUPPORTED_VERSIONS, ApiKey.METADATA: (0, 7)})
    env.connect(0)
    env.send(0)
    env.poll()
    assert env.selector.requests(node_id=0, api_key=ApiKey.METADATA)[-1].api_version == 7
    assert env.selector.requests()[-1].header.client_id == "kclient"


def test_a_broker_that_does_not_know_our_api_versions_version_is_asked_again_lower() -> None:
    env = make_env()

    def old_broker(request: SentRequest) -> dict[str, object] | bytearray:
        if request.api_version > 2:
            error = {
                "error_code": errors.UnsupportedVersionError.code,
                "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}],
            }
            return response_payload(request, error, api_version=0)  # brokers answer as v0
        return api_versions_body()

    env.selector.serve(ApiKey.API_VERSIONS, old_broker)
    env.connect(0)
    sent = env.selector.requests(node_id=0, api_key=ApiKey.API_VERSIONS)
    assert [r.api_version for r in sent] == [SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1], 2]


def test_an_api_versions_error_disconnects_the_node() -> None:
    env = make_env()
    env.selector.serve(ApiKey.API_VERSIONS, lambda r: api_versions_body(error_code=31))
    node = env.node(0)
    env.client.ready(node, env.now)
    env.poll()
    env.poll()
    assert not env.client.is_ready(node, env.now)
    assert env.client.connection_failed(node)
    assert (
        "CLUSTER_AUTHORIZATION_FAILED"
        in env.client.connection_failures()["localhost:9092 (10.0.0.1:9092)"]
    )


def test_a_request_no_common_version_fits_fails_without_being_sent() -> None:
    env = make_env(api_versions={**SUPPORTED_VERSIONS, ApiKey.PRODUCE: (0, 2)})
    env.connect(0)
    request = ClientRequest(0, ApiKey.PRODUCE, {}, env.now, callback=env.done.append)
    env.client.send(request, env.now)
    [response] = env.poll()
    assert response.version_mismatch is not None
    assert "node 0 supports v0-v2, kclient supports v3-v13" in str(response.version_mismatch)
    assert env.selector.requests(api_key=ApiKey.PRODUCE) == []
    assert env.done == [response]


# ---- requests and responses -----------------------------------------------------


def test_responses_complete_requests_in_order_and_run_callbacks(env: Env) -> None:
    env.connect(0)
    requests = []
    for _ in range(3):
        requests.append(env.send(0))
        env.poll()
    assert env.client.in_flight_request_count(0) == 3
    for _ in range(3):
        env.selector.respond(0, metadata_update_with(3, {"t": 3}))
    responses = env.poll()
    assert [r.request for r in responses] == requests
    assert env.done == responses
    assert all(r.body is not None and r.body["brokers"] for r in responses)
    assert env.client.in_flight_request_count() == 0


def test_a_response_with_the_wrong_correlation_id_closes_the_connection(env: Env) -> None:
    node = env.connect(0)
    env.send(0)
    env.poll()
    env.send(0)
    env.poll()
    oldest = env.selector.unanswered(0)[0]
    lie = response_payload(
        oldest, metadata_update_with(1), correlation_id=oldest.header.correlation_id + 1
    )
    env.selector.receive(0, lie)
    responses = env.poll()
    assert len(responses) == 2
    assert all(r.disconnected for r in responses)
    assert "correlation id" in str(responses[0].error)
    assert isinstance(responses[0].error, errors.ProtocolDecodeError)
    assert not env.client.is_ready(node, env.now)
    assert env.metadata.update_requested()


def test_a_response_that_does_not_decode_closes_the_connection(env: Env) -> None:
    env.connect(0)
    request = env.send(0)
    env.poll()
    cid = env.selector.unanswered(0)[0].header.correlation_id
    env.selector.receive(0, cid.to_bytes(4, "big") + b"\x00\x01garbage")
    [response] = env.poll()
    assert response.request is request and response.disconnected
    assert isinstance(response.error, errors.ProtocolDecodeError)


def test_a_request_that_expects_no_response_completes_when_written(env: Env) -> None:
    env.connect(0)
    request = env.send(0, expect_response=False)
    [response] = env.poll()
    assert response.request is request
    assert response.body is None and not response.disconnected
    assert env.client.in_flight_request_count() == 0


def test_a_broker_answering_a_request_that_expects_none_keeps_the_connection(env: Env) -> None:
    # Kafka never answers acks=0 Produce requests, but some compatible brokers (tansu) do.
    env.connect(0)
    quiet = env.send(0, expect_response=False)
    [written] = env.poll()
    assert written.request is quiet
    env.send(0)
    assert env.poll() == []
    sent_quiet, sent_normal = env.selector.requests(0)[-2:]
    assert sent_quiet.header.correlation_id == written.correlation_id
    env.selector.receive(0, response_payload(sent_quiet, {"brokers": [], "topics": []}))
    env.selector.receive(0, response_payload(sent_normal, {"brokers": [], "topics": []}))
    [answered] = env.poll()
    assert not answered.disconnected and answered.body is not None
    assert env.selector.is_connected(0)
    assert env.client.in_flight_request_count() == 0
    # a response nobody asked for is still a protocol error
    env.selector.receive(0, response_payload(sent_normal, {"brokers": [], "topics": []}))
    env.poll()
    assert not env.selector.is_connected(0)


def test_send_to_a_node_that_is_not_ready_is_refused(env: Env) -> None:
    with pytest.raises(IllegalStateError, match="node 2 is not ready"):
        env.send(2)


def test_max_in_flight_requests_per_connection_is_enforced() -> None:
    env = make_env(config=NetworkClientConfig(max_in_flight_requests_per_connection=2))
    node = env.connect(0)
    env.send(0)
    env.poll()
    assert env.client.is_ready(node, env.now)
    env.send(0)
    env.poll()
    assert not env.client.is_ready(node, env.now)
    env.selector.respond(0, metadata_update_with(3))
    env.poll()
    assert env.client.is_ready(node, env.now)


def test_nothing_more_is_sent_while_the_last_send_is_still_being_written(env: Env) -> None:
    node = env.connect(0)
    env.selector.stall_sends(0)
    env.send(0)
    env.poll()
    assert not env.client.is_ready(node, env.now)
    env.selector.release_sends(0)
    env.poll()
    assert env.client.is_ready(node, env.now)


def test_a_throttled_node_is_not_ready_until_the_throttle_time_passes(env: Env) -> None:
    node = env.connect(0)
    env.send(0)
    env.poll()
    body = metadata_update_with(3)
    body["throttle_time_ms"] = 500
    env.selector.respond(0, body)
    env.poll()
    assert not env.client.is_ready(node, env.now)
    assert env.client.poll_delay_ms(node, env.now) == 500
    env.clock.advance(500)
    assert env.client.is_ready(node, env.now)


def test_a_failing_callback_is_logged_and_the_others_still_run(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.connect(0)

    def explode(response: ClientResponse) -> None:
        raise RuntimeError("callback bug")

    env.client.send(
        ClientRequest(0, ApiKey.METADATA, METADATA_BODY, env.now, callback=explode), env.now
    )
    env.poll()
    env.send(0)
    env.poll()
    env.selector.respond(0, metadata_update_with(3))
    env.selector.respond(0, metadata_update_with(3))
    with caplog.at_level(logging.ERROR):
        responses = env.poll()
    assert len(responses) == 2 and len(env.done) == 1
    assert "uncaught error in a request completion callback" in caplog.text


# ---- disconnects and timeouts ------------------------------------------------------


def test_a_disconnect_fails_in_flight_requests_and_requests_metadata(env: Env) -> None:
    node = env.connect(1)
    env.send(1)
    env.poll()
    env.send(1)
    env.poll()
    env.selector.server_disconnect(1)
    responses = env.poll()
    assert len(responses) == 2
    assert all(r.disconnected and not r.timed_out for r in responses)
    assert all(isinstance(r.error, KafkaConnectionError) for r in responses)
    assert env.metadata.update_requested()
    assert env.client.connection_failed(node)


def test_after_a_disconnect_reconnecting_waits_for_the_backoff(env: Env) -> None:
    node = env.connect(1)
    env.selector.server_disconnect(1)
    env.poll()
    attempts = len(env.selector.connect_attempts)
    delay_ms = env.client.connection_delay(node, env.now)
    assert 40 <= delay_ms <= 60
    assert not env.client.ready(node, env.now)
    assert len(env.selector.connect_attempts) == attempts
    env.clock.advance(delay_ms)
    env.client.ready(node, env.now)
    assert len(env.selector.connect_attempts) == attempts + 1


def test_a_request_without_response_within_request_timeout_disconnects_the_node(
    env: Env,
) -> None:
    node = env.connect(0)
    env.send(0)
    env.poll()
    env.clock.advance(30_000)
    assert env.poll() == []
    env.clock.advance(1)
    [response] = env.poll()
    assert response.disconnected and response.timed_out
    assert isinstance(response.error, KafkaTimeoutError)
    assert "within 30000 ms (request.timeout.ms)" in str(response.error)
    assert not env.selector.is_connected(0)
    assert not env.client.is_ready(node, env.now)


def test_a_request_can_carry_its_own_timeout(env: Env) -> None:
    env.connect(0)
    env.send(0, request_timeout_ms=1000)
    env.poll()
    env.clock.advance(1001)
    [response] = env.poll()
    assert response.timed_out


def test_after_an_earlier_request_is_answered_the_next_times_out_at_its_own_deadline(
    env: Env,
) -> None:
    env.connect(0)
    env.send(0, request_timeout_ms=1000)
    env.poll()
    env.clock.advance(600)
    env.send(0, request_timeout_ms=1000)
    env.poll()
    env.selector.respond(0, {"throttle_time_ms": 0, "brokers": [], "topics": []})
    [answered] = env.poll()
    assert not answered.disconnected
    env.clock.advance(401)  # past the first request's deadline: nothing is late now
    assert env.poll() == []
    env.clock.advance(599)  # 1000 ms after the second was sent
    assert env.poll() == []
    env.clock.advance(1)
    [late] = env.poll()
    assert late.timed_out


def test_poll_waits_no_longer_than_the_next_request_deadline(env: Env) -> None:
    env.connect(0)
    env.send(0, request_timeout_ms=2000)
    env.poll()
    env.clock.advance(500)
    env.poll(60_000)
    assert env.selector.poll_timeouts_ms[-1] == 1501


def test_a_connection_that_never_completes_times_out(env: Env) -> None:
    node = env.node(2)
    env.selector.block_connect(2)
    env.client.ready(node, env.now)
    env.poll()
    env.clock.advance(12_001)  # setup timeout: 10 s ± 20%
    env.poll()
    assert env.client.connection_failed(node)
    reason = env.client.connection_failures()["localhost:9094 (10.0.0.1:9094)"]
    assert "timed out after" in reason and "socket.connection.setup.timeout.ms" in reason


def test_disconnect_on_request_returns_in_flight_requests_next_poll(env: Env) -> None:
    node = env.connect(0)
    request = env.send(0)
    env.poll()
    env.client.disconnect(0)
    [response] = env.poll()
    assert response.request is request and response.disconnected
    assert not env.client.is_ready(node, env.now)


# ---- least-loaded node and metadata ------------------------------------------------


def test_least_loaded_node_prefers_a_ready_node_with_fewest_in_flight(env: Env) -> None:
    for node_id, count in ((0, 2), (1, 1), (2, 3)):
        env.connect(node_id)
        for _ in range(count):
            env.send(node_id)
            env.poll()
    assert env.client.least_loaded_node(env.now) == env.node(1)


def test_least_loaded_node_prefers_a_connecting_node_over_a_new_connection(env: Env) -> None:
    env.selector.block_connect(2)
    env.client.ready(env.node(2), env.now)
    assert env.client.least_loaded_node(env.now) == env.node(2)


def test_least_loaded_node_skips_nodes_in_backoff(env: Env) -> None:
    for node_id in (0, 1, 2):
        env.selector.refuse_connect(node_id)
        env.client.ready(env.node(node_id), env.now)
    assert env.client.least_loaded_node(env.now) is None
    env.clock.advance(60)
    assert env.client.least_loaded_node(env.now) is not None


def test_a_due_metadata_update_goes_to_the_least_loaded_node_one_at_a_time(env: Env) -> None:
    env.connect(0)
    env.connect(1)
    env.send(0)
    env.poll()
    env.clock.advance(100)  # retry.backoff.ms after the last refresh
    env.metadata.request_update()
    assert not env.client.is_ready(env.node(1), env.now)  # the refresh goes first
    env.poll()
    env.poll()
    env.poll()
    [metadata_request] = env.selector.requests(node_id=1, api_key=ApiKey.METADATA)
    assert [t["name"] for t in metadata_request.body["topics"]] == ["t"]
    assert len(env.selector.requests(api_key=ApiKey.METADATA)) == 2  # ours + one refresh
    version = env.metadata.update_version
    env.selector.respond(1, metadata_update_with(3, {"t": 3}, leaders={("t", 0): 2}))
    env.poll()
    assert env.metadata.update_version == version + 1
    assert env.metadata.fetch().leader_for(TopicPartition("t", 0)) == env.node(2)


def test_metadata_is_refreshed_after_metadata_max_age_ms(env: Env) -> None:
    env.connect(0)
    env.clock.advance(300_000)
    env.poll()
    env.poll()
    assert env.selector.requests(api_key=ApiKey.METADATA)


def test_poll_ready_reads_answers_and_leaves_a_due_metadata_update_to_the_next_poll(
    env: Env,
) -> None:
    env.connect(0)
    env.send(0)
    env.poll()
    env.clock.advance(300_000)  # a refresh is due
    env.selector.respond(0, metadata_update_with(3, {"t": 3}))
    env.client.poll_ready(env.now)  # an event loop's callback: the socket is readable
    assert len(env.done) == 1  # the answer was read and called back
    assert not env.selector.requests(api_key=ApiKey.METADATA)[1:]  # no refresh asked yet
    env.poll()
    env.poll()
    assert len(env.selector.requests(api_key=ApiKey.METADATA)) == 2  # the poll asked


def test_with_only_bootstrap_servers_the_client_connects_and_fetches_metadata() -> None:
    env = make_env(bootstrap_only=[("seed", 9092)])
    env.selector.serve(ApiKey.METADATA, metadata_response_for)
    for _ in range(5):
        env.poll()
    assert env.selector.connect_attempts[0] == (-1, "10.0.0.1", 9092)
    assert [n.id for n in env.metadata.fetch().nodes] == [0, 1, 2]
    assert not env.metadata.fetch().is_bootstrap_configured


def test_a_metadata_response_without_brokers_is_ignored_and_retried_after_backoff() -> None:
    env = make_env(bootstrap_only=[("seed", 9092)])
    env.selector.serve(ApiKey.METADATA, lambda r: {"brokers": [], "topics": []})
    for _ in range(4):
        env.poll()
    assert env.metadata.fetch().is_bootstrap_configured
    sent = len(env.selector.requests(api_key=ApiKey.METADATA))
    env.poll()
    assert len(env.selector.requests(api_key=ApiKey.METADATA)) == sent  # backing off
    env.clock.advance(120)  # retry.backoff.ms (100) with at most +20 % jitter
    env.poll()
    assert len(env.selector.requests(api_key=ApiKey.METADATA)) == sent + 1


# ---- clear failures --------------------------------------------------------------


def test_unreachable_bootstrap_names_every_address_and_its_os_error() -> None:
    def resolver(host: str, port: int) -> list[Address]:
        if host == "nohost.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, "127.0.0.1", port)]

    env = make_env(
        bootstrap_only=[("localhost", 9092), ("nohost.invalid", 9093)], resolver=resolver
    )
    env.selector.refuse_connect(-1)
    for _ in range(50):
        env.poll()
        env.clock.advance(100)
    error = env.client.no_broker_reachable_error(5_000)
    assert isinstance(error, KafkaTimeoutError)
    text = str(error)
    assert "no broker reachable after 5 s" in text
    assert "localhost:9092 (127.0.0.1:9092): connection refused" in text
    assert "nohost.invalid:9093: no such host" in text
    assert "bootstrap.servers" in text


def test_a_connection_dropped_before_api_versions_suggests_tls() -> None:
    env = make_env(bootstrap_only=[("localhost", 9093)])
    env.selector.stop_serving(ApiKey.API_VERSIONS)  # a TLS listener never answers
    for _ in range(3):
        env.poll()  # connect, then ApiVersions
    assert env.selector.unanswered(-1)
    env.selector.server_disconnect(-1, KafkaConnectionError("connection reset by peer"))
    env.poll()
    text = str(env.client.no_broker_reachable_error(1_000))
    assert "connection reset by peer before answering ApiVersions" in text
    assert "set 'security.protocol' to SSL" in text


def test_a_connection_dropped_before_its_first_real_answer_suggests_sasl() -> None:
    env = make_env(bootstrap_only=[("localhost", 9094)])
    for _ in range(3):
        env.poll()  # connect, ApiVersions answered, the Metadata request goes out
    assert env.selector.unanswered(-1)[0].api_key == ApiKey.METADATA
    env.selector.server_disconnect(-1, KafkaConnectionError("connection reset by peer"))
    env.poll()
    text = str(env.client.no_broker_reachable_error(1_000))
    assert "before answering any request after ApiVersions (a SASL listener?" in text


def test_a_connection_that_answered_before_dropping_is_no_sasl_suspect(env: Env) -> None:
    env.selector.serve(ApiKey.METADATA, metadata_response_for)
    node = env.connect(1)
    env.client.send(ClientRequest(node.id, ApiKey.METADATA, {"topics": None}, env.now), env.now)
    env.poll()  # answered
    env.selector.server_disconnect(node.id)
    env.poll()
    assert "SASL" not in str(env.client.no_broker_reachable_error(1_000))


def test_every_resolved_address_of_a_bootstrap_server_is_tried() -> None:
    def two_addresses(host: str, port: int) -> list[Address]:
        return [(socket.AF_INET, "10.0.0.1", port), (socket.AF_INET, "10.0.0.2", port)]

    env = make_env(bootstrap_only=[("seed", 9092)], resolver=two_addresses)
    env.selector.refuse_connect(-1)
    for _ in range(20):
        env.poll()
        env.clock.advance(100)
    hosts = [host for _, host, _ in env.selector.connect_attempts]
    assert hosts[:4] == ["10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.2"]


# ---- lifecycle -----------------------------------------------------------------


def test_wakeup_reaches_the_selector(env: Env) -> None:
    env.client.wakeup()
    assert env.selector.wakeups == 1


def test_a_closed_client_refuses_to_poll(env: Env) -> None:
    env.client.close()
    assert env.selector.closed
    with pytest.raises(IllegalStateError, match="closed"):
        env.poll()


def test_topics_nobody_asked_for_are_dropped_before_they_take_memory() -> None:
    """A broker answers the metadata request for 't' with 20,000 partitions of 'noise'
    too: they are stepped over in the response's bytes, never decoded into objects."""
    env = make_env(bootstrap_only=[("broker", 9092)])
    body = metadata_update_with(1, {"t": 2, "noise": 20_000})
    encoded: dict[int, bytes] = {}

    def answer(request: SentRequest) -> bytearray:
        if request.api_version not in encoded:
            encoded[request.api_version] = bytes(response_payload(request, body))
        frame = bytearray(encoded[request.api_version])
        frame[0:4] = request.header.correlation_id.to_bytes(4, "big")
        return frame

    env.selector.serve(ApiKey.METADATA, answer)
    for _ in range(3):  # connected, versions, the first (empty) metadata request answered
        env.poll()
    env.metadata.add("t", env.now)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(3):
            env.poll()
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert env.metadata.fetch().topics == {"t"}
    assert env.metadata.fetch().partition_count_for_topic("t") == 2
    # the 20,000 partitions as dicts would be about 10 MB; their bytes are about 0.5 MB
    assert peak_bytes < 3_000_000
