"""Controller: topics, leader spreading and movement, persistence; producer sequences."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from kclient import errors
from kclient.broker.config import BrokerConfig, parse_listen
from kclient.broker.controller import BrokerEndpoint, Controller, validate_topic_name
from kclient.broker.log import Log
from kclient.broker.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateManager,
    next_sequence,
)


def cluster(n: int, **settings: object) -> Controller:
    c = Controller(BrokerConfig(**settings), range(n))  # type: ignore[arg-type]
    for node in range(n):
        c.broker_started(BrokerEndpoint(node, "127.0.0.1", 9000 + node))
    return c


def test_leaders_are_spread_over_the_brokers() -> None:
    c = cluster(3)
    c.create_topic("a", 6)
    c.create_topic("b", 3)
    leaders = Counter(p.leader_id for t in c.topics.values() for p in t.partitions)
    assert leaders == {0: 3, 1: 3, 2: 3}
    p = c.partition("a", 0)
    assert p is not None and p.leader_epoch == 0 and len(p.replicas) == 3


def test_stopping_a_broker_moves_its_leaderships_and_starting_it_takes_them_back() -> None:
    c = cluster(3)
    c.create_topic("t", 3)
    before = {p.index: (p.leader_id, p.leader_epoch) for p in c.topics["t"].partitions}
    c.broker_stopped(1)
    after = {p.index: (p.leader_id, p.leader_epoch) for p in c.topics["t"].partitions}
    for index, (leader, epoch) in before.items():
        if leader == 1:
            assert after[index][0] not in (1, -1) and after[index][1] == epoch + 1
        else:
            assert after[index] == (leader, epoch)
    assert [b.node_id for b in c.live_brokers()] == [0, 2]
    c.broker_started(BrokerEndpoint(1, "127.0.0.1", 9001))
    back = {p.index: p.leader_id for p in c.topics["t"].partitions}
    assert back == {i: leader for i, (leader, _) in before.items()}


def test_all_brokers_down_leaves_no_leader_and_one_up_takes_everything() -> None:
    c = cluster(2)
    c.create_topic("t", 2, replication_factor=1)
    c.broker_stopped(0)
    c.broker_stopped(1)
    assert {p.leader_id for p in c.topics["t"].partitions} == {-1}
    assert c.controller_id() == -1
    c.broker_started(BrokerEndpoint(0, "127.0.0.1", 9000))
    leaders = sorted(p.leader_id for p in c.topics["t"].partitions)
    assert leaders == [-1, 0]  # replication factor 1: partition of broker 1 stays offline


def test_topic_validation() -> None:
    c = cluster(1)
    for bad in ("", ".", "..", "a" * 250, "has space", "sl/ash"):
        with pytest.raises(errors.InvalidTopicError):
            validate_topic_name(bad)
    c.create_topic("a.b", 1)
    with pytest.raises(errors.InvalidTopicError):
        c.create_topic("a_b", 1)  # collides in metric names
    with pytest.raises(errors.TopicAlreadyExistsError):
        c.create_topic("a.b", 1)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        c.delete_topic("missing")
    c.delete_topic("a.b")  # its metric name is free again
    c.create_topic("a_b", 1)
    with pytest.raises(errors.InvalidTopicError, match="collides with existing topic 'a_b'"):
        c.create_topic("a.b", 1)


def test_topics_survive_a_restart_with_a_log_dir(tmp_path: Path) -> None:
    c = cluster(2, log_dir=str(tmp_path))
    c.create_topic("kept", 3, configs={"message.timestamp.type": "LogAppendTime"})
    topic_id = c.topics["kept"].topic_id
    c.close()
    again = cluster(2, log_dir=str(tmp_path))
    t = again.topics["kept"]
    assert (t.topic_id, len(t.partitions), t.log_append_time) == (topic_id, 3, True)
    assert {p.leader_id for p in t.partitions} <= {0, 1}
    again.close()


def test_config_validation_and_listen_parsing() -> None:
    with pytest.raises(errors.ConfigError, match="num.io.threads"):
        BrokerConfig(num_io_threads=0)
    with pytest.raises(errors.ConfigError, match="port"):
        BrokerConfig(port=70000)
    assert parse_listen("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_listen(":0") == ("127.0.0.1", 0)
    assert parse_listen("9093") == ("127.0.0.1", 9093)
    with pytest.raises(errors.ConfigError, match="HOST:PORT"):
        parse_listen("localhost:http")


def test_sequence_numbers_wrap_like_kafka() -> None:
    assert next_sequence(5, 3) == 8
    assert next_sequence(INT32_MAX, 1) == 0
    assert next_sequence(INT32_MAX - 1, 3) == 1


def test_producer_state_keeps_the_last_five_batches() -> None:
    state = ProducerStateManager("t-0")
    for i in range(7):
        info = state.prepare()
        info.check(1, 0, i)
        info.append(1, 0, BatchMetadata(i, i, i, i, 0))
        info.commit()
    assert state.find_duplicate(1, 0, 6, 6) is not None
    assert state.find_duplicate(1, 0, 2, 2) is not None
    assert state.find_duplicate(1, 0, 1, 1) is None  # fell out of the cache
    assert state.find_duplicate(1, 1, 6, 6) is None  # other epoch
    staged = state.prepare()
    staged.append(1, 0, BatchMetadata(7, 7, 7, 7, 0))
    assert state.find_duplicate(1, 0, 7, 7) is None  # not committed


class _WatchedController(Controller):
    """Records, while each log is opened, whether another thread could take the lock."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lock_free_while_opening: list[bool] = []
        self.seen_during_creation: list[object] = []

    def _open_log(self, topic: str, index: int, topic_id: object) -> Log:  # type: ignore[override]
        if index == 0:
            got: list[bool] = []

            def try_lock() -> None:
                acquired = self.lock.acquire(timeout=2)
                got.append(acquired)
                if acquired:
                    self.lock.release()

            other = threading.Thread(target=try_lock)
            other.start()
            other.join(5)
            self.lock_free_while_opening.append(got == [True])
            # what other requests see meanwhile: no topic yet, and its name is taken
            self.seen_during_creation.append(self.topic(topic))
            if got == [True]:
                try:
                    self.create_topic(topic, 1)
                except errors.BrokerResponseError as exc:
                    self.seen_during_creation.append(type(exc))
        return super()._open_log(topic, index, topic_id)  # type: ignore[arg-type]


def test_a_big_create_opens_its_logs_without_holding_the_controller_lock() -> None:
    c = _WatchedController(BrokerConfig(), range(1))
    c.broker_started(BrokerEndpoint(0, "127.0.0.1", 9000))
    topic = c.create_topic("big", 50)
    assert c.lock_free_while_opening == [True]
    assert c.seen_during_creation == [None, errors.TopicAlreadyExistsError]
    assert len(topic.partitions) == 50 and c.topic("big") is topic
    assert all(p.leader_id == 0 for p in topic.partitions)
    with pytest.raises(errors.TopicAlreadyExistsError):
        c.create_topic("big", 1)
