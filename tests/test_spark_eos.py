"""The exactly-once sink's driver protocol as a state machine over a fake store and fake
transaction completion: what a batch writes, records and commits, what a replay after a
crash at each step does, which leftovers it aborts, and how a lost transaction fails."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kclient import errors
from kclient.errors import ConfigError
from kclient.protocol import ApiKey
from kclient.sender.coordinator_calls import CoordinatorCalls
from kclient.sender.txn_completion import PreparedTxn, TransactionNotCompletedError
from kclient.spark.eos import (
    DONE,
    RECORDED,
    WRITING,
    ExactlyOnceDriver,
    ExactlyOnceRowsLostError,
    GroupOffsetsStore,
    SinkState,
    TaskTxn,
    check_sink_id,
    transactional_id,
)
from kclient.spark.eos_task import check_broker, check_exactly_once_config, check_no_speculation
from kclient.testing import MockClock
from kclient.testing.client import MockClient, metadata_update_with

SINK = "orders"
TXNS = (TaskTxn(0, 4000, 0, 10), TaskTxn(1, 4001, 2, 0), TaskTxn(2, 4002, 1, 5))


class FakeStore:
    def __init__(self, state: SinkState | None = None) -> None:
        self.state = state
        self.saved: list[SinkState] = []

    def load(self) -> SinkState | None:
        return self.state

    def save(self, state: SinkState) -> None:
        self.saved.append(state)
        self.state = state


class FakeCompleter:
    def __init__(self, lost: set[str] | None = None) -> None:
        self.committed: list[PreparedTxn] = []
        self.fenced: list[str] = []
        self.lost = lost or set()

    def commit(self, txn: PreparedTxn) -> None:
        if txn.transactional_id in self.lost:
            raise TransactionNotCompletedError(
                f"{txn.transactional_id}: PRODUCER_FENCED", errors.ProducerFencedError.code
            )
        self.committed.append(txn)

    def fence(self, transactional_id: str) -> None:
        self.fenced.append(transactional_id)


class Tasks:
    """The tasks' side: records how often the batch was written."""

    def __init__(self, txns: Sequence[TaskTxn] = TXNS) -> None:
        self.txns = list(txns)
        self.runs = 0

    def __call__(self) -> Sequence[TaskTxn]:
        self.runs += 1
        return self.txns


def driver(state: SinkState | None = None, lost: set[str] | None = None) -> ExactlyOnceDriver:
    return ExactlyOnceDriver(SINK, FakeStore(state), FakeCompleter(lost))


def store_of(d: ExactlyOnceDriver) -> FakeStore:
    assert isinstance(d.store, FakeStore)
    return d.store


def completer_of(d: ExactlyOnceDriver) -> FakeCompleter:
    assert isinstance(d.completer, FakeCompleter)
    return d.completer


def test_a_batch_is_recorded_before_its_transactions_are_committed_then_marked_done() -> None:
    d = driver()
    tasks = Tasks()
    outcome = d.run_batch(7, 3, tasks)
    assert [(s.phase, s.batch_id) for s in store_of(d).saved] == [
        (WRITING, 7),
        (RECORDED, 7),
        (DONE, 7),
    ]
    assert store_of(d).saved[0].tasks == 3
    assert store_of(d).saved[1].txns == (TXNS[0], TXNS[2])  # the empty task has nothing to commit
    assert completer_of(d).committed == [
        PreparedTxn("kclient-eos.orders.0", 4000, 0),
        PreparedTxn("kclient-eos.orders.2", 4002, 1),
    ]
    assert (outcome.action, outcome.records, tasks.runs) == ("written", 15, 1)


def test_a_replayed_batch_that_is_done_is_skipped() -> None:
    d = driver(SinkState(DONE, 7))
    tasks = Tasks()
    assert d.run_batch(7, 3, tasks).action == "skipped"
    assert (tasks.runs, store_of(d).saved, completer_of(d).committed) == (0, [], [])


def test_a_replayed_batch_that_was_recorded_is_committed_without_rewriting_it() -> None:
    d = driver(SinkState(RECORDED, 7, txns=(TXNS[0], TXNS[2])))
    tasks = Tasks()
    outcome = d.run_batch(7, 3, tasks)
    assert (outcome.action, outcome.records, tasks.runs) == ("completed", 15, 0)
    assert [t.transactional_id for t in completer_of(d).committed] == [
        "kclient-eos.orders.0",
        "kclient-eos.orders.2",
    ]
    assert store_of(d).saved == [SinkState(DONE, 7)]


def test_an_earlier_recorded_batch_is_committed_before_the_next_is_written() -> None:
    d = driver(SinkState(RECORDED, 6, txns=(TXNS[0],)))
    tasks = Tasks()
    d.run_batch(7, 3, tasks)
    assert [t.transactional_id for t in completer_of(d).committed][:1] == ["kclient-eos.orders.0"]
    assert [(s.phase, s.batch_id) for s in store_of(d).saved][:2] == [(DONE, 6), (WRITING, 7)]
    assert tasks.runs == 1


def test_a_replay_with_fewer_tasks_aborts_the_leftover_ids_it_will_not_reuse() -> None:
    d = driver(SinkState(WRITING, 7, tasks=5))
    tasks = Tasks()
    d.run_batch(7, 3, tasks)
    # tasks 0-2 fence their own ids when they start; 3 and 4 would hold the LSO
    assert completer_of(d).fenced == ["kclient-eos.orders.3", "kclient-eos.orders.4"]
    assert tasks.runs == 1


def test_leftovers_of_an_unfinished_other_batch_beyond_the_new_tasks_are_aborted() -> None:
    d = driver(SinkState(WRITING, 6, tasks=5))
    d.run_batch(7, 3, Tasks())
    # the ids are the same for every batch: tasks 0-2 of batch 7 fence their own
    assert completer_of(d).fenced == ["kclient-eos.orders.3", "kclient-eos.orders.4"]


def test_a_batch_older_than_the_store_is_skipped() -> None:
    d = driver(SinkState(WRITING, 9, tasks=2))
    tasks = Tasks()
    assert d.run_batch(7, 3, tasks).action == "skipped"
    assert (tasks.runs, completer_of(d).fenced) == (0, [])


def test_a_transaction_aborted_before_the_commit_fails_the_batch_saying_rows_were_lost() -> None:
    d = driver(lost={"kclient-eos.orders.2"})
    with pytest.raises(
        ExactlyOnceRowsLostError, match=r"batch 7 lost 5 rows.*transaction\.timeout\.ms"
    ):
        d.run_batch(7, 3, Tasks())
    assert store_of(d).state == SinkState(RECORDED, 7, txns=(TXNS[0], TXNS[2]))  # not done


def test_tasks_that_fail_leave_the_batch_unrecorded_and_it_is_written_again() -> None:
    d = driver()

    def failing() -> Sequence[TaskTxn]:
        raise RuntimeError("a task failed 3 times")

    with pytest.raises(RuntimeError):
        d.run_batch(7, 3, failing)
    assert store_of(d).state == SinkState(WRITING, 7, tasks=3)
    assert completer_of(d).committed == []
    tasks = Tasks()
    assert d.run_batch(7, 3, tasks).action == "written"
    assert tasks.runs == 1


def test_batch_jobs_take_the_batch_after_the_last_one_stored() -> None:
    assert driver().next_batch_id() == 0
    assert driver(SinkState(DONE, 4)).next_batch_id() == 5
    assert driver(SinkState(WRITING, 4, tasks=1)).next_batch_id() == 5


class MetadataDroppingOffsets:
    """Committed offsets as a broker that keeps offsets but not their metadata (tansu)."""

    def __init__(self) -> None:
        self.offsets: dict[str, int] = {}
        self.metadata: dict[str, str] = {}
        self.commits: list[str] = []

    def commit(self, group: str, offset: int, metadata: str) -> None:
        self.offsets[group] = offset
        self.metadata[group] = metadata
        self.commits.append(group)

    def fetch(self, group: str) -> int | None:
        return self.offsets.get(group)


@pytest.mark.parametrize(
    "state",
    [
        SinkState(WRITING, 3, tasks=12),
        SinkState(RECORDED, 3, txns=(TaskTxn(0, 0, 0, 0), TaskTxn(2, 2**38 - 2, 32767, 0))),
        SinkState(RECORDED, 4, txns=(TaskTxn(0, 7, 3, 0, 1), TaskTxn(1, 9, 0, 0, 255))),
        SinkState(RECORDED, 2**43 - 1),
        SinkState(DONE, 0),
    ],
)
def test_the_state_survives_in_offsets_alone(state: SinkState) -> None:
    backend = MetadataDroppingOffsets()
    GroupOffsetsStore(backend, SINK).save(state)
    assert GroupOffsetsStore(backend, SINK).load() == state  # a new driver reads it back


def test_task_groups_are_written_before_the_record_that_makes_them_count() -> None:
    backend = MetadataDroppingOffsets()
    store = GroupOffsetsStore(backend, SINK)
    assert store.load() is None
    store.save(SinkState(RECORDED, 7, txns=(TXNS[0], TXNS[2])))
    assert backend.commits == [
        "kclient-eos.orders.task-0",
        "kclient-eos.orders.task-1",
        "kclient-eos.orders.task-2",
        "kclient-eos.orders",
    ]
    assert backend.metadata["kclient-eos.orders"] == "kclient-eos/1 R 7 3"
    assert backend.offsets["kclient-eos.orders.task-1"] == 0  # no transaction: task 1 had no rows
    store.save(SinkState(DONE, 7))
    assert store.load() == SinkState(DONE, 7)


def test_a_foreign_offset_in_the_sinks_group_is_refused() -> None:
    backend = MetadataDroppingOffsets()
    backend.offsets["kclient-eos.orders"] = 1000  # phase bits 0: not ours
    with pytest.raises(ConfigError, match="not written by this sink"):
        GroupOffsetsStore(backend, SINK).load()
    with pytest.raises(ConfigError, match="up to 262143 tasks"):
        GroupOffsetsStore(backend, SINK).save(SinkState(WRITING, 1, tasks=300_000))


@pytest.mark.parametrize("bad", [None, "", "has space", "x" * 101, "a/b"])
def test_sink_id_is_required_and_safe_for_transactional_ids(bad: object) -> None:
    with pytest.raises(ConfigError, match="needs sink_id"):
        check_sink_id(bad)
    assert check_sink_id("orders-v2.eu_1") == "orders-v2.eu_1"


# ---- settings and broker checks (driver, before any task) ----------------------------------


def test_settings_the_exactly_once_sink_owns_or_needs_are_refused() -> None:
    with pytest.raises(ConfigError, match="needs the topic argument"):
        check_exactly_once_config(None, {"bootstrap.servers": "h:1"})
    with pytest.raises(ConfigError, match="'transactional.id' cannot be set"):
        check_exactly_once_config("t", {"bootstrap.servers": "h:1", "transactional.id": "x"})
    with pytest.raises(ConfigError, match="'enable_idempotence' is false"):
        check_exactly_once_config("t", {"bootstrap.servers": "h:1", "enable_idempotence": False})
    cfg = check_exactly_once_config("t", {"bootstrap.servers": "h:1"})
    assert cfg.enable_idempotence and cfg.acks == -1


@pytest.mark.parametrize("value", ["true", "TRUE", " true "])
def test_speculative_execution_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError, match="spark.speculation=false"):
        check_no_speculation(value)


@pytest.mark.parametrize("value", [None, "false", "False"])
def test_without_speculative_execution_the_sink_runs(value: str | None) -> None:
    check_no_speculation(value)


def broker_answering_init_producer_id(
    body: dict[str, object] | None, *, version_mismatch: bool = False
) -> tuple[MockClient, CoordinatorCalls]:
    clock = MockClock(auto_tick_ms=1)
    client = MockClient(clock, metadata_update_with(1, {"t": 1}))
    found = {"node_id": 0, "host": "localhost", "port": 9092, "key": "k", "error_code": 0}
    client.prepare_response({"coordinators": [found], **found}, api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response(
        body, api_key=ApiKey.INIT_PRODUCER_ID, version_mismatch=version_mismatch
    )
    return client, CoordinatorCalls(client, clock)


def test_a_transaction_timeout_above_the_brokers_maximum_is_a_config_error() -> None:
    code = errors.InvalidTransactionTimeoutError.code
    _, calls = broker_answering_init_producer_id(body={"error_code": code})
    with pytest.raises(ConfigError, match=r"'transaction\.timeout\.ms' \(1000000\).*max"):
        check_broker(calls, SINK, 1_000_000, 5_000)


def test_a_broker_without_transactions_is_named_before_any_task() -> None:
    _, calls = broker_answering_init_producer_id(body=None, version_mismatch=True)
    with pytest.raises(errors.UnsupportedVersionError, match="needs a broker with transactions"):
        check_broker(calls, SINK, 60_000, 5_000)
    client, calls = broker_answering_init_producer_id(
        body={"error_code": 0, "producer_id": 1, "producer_epoch": 0}
    )
    check_broker(calls, SINK, 60_000, 5_000)
    assert client.sent[-1].body_for(4)["transactional_id"] == "kclient-eos.orders.check"


def test_a_batch_whose_task_was_retried_commits_under_the_retrys_transactional_id() -> None:
    """A retried task writes under its own attempt's id, so a late copy of the failed
    attempt (its Python worker still starting) cannot fence the retry's transaction."""
    d = driver()
    d.run_batch(7, 2, Tasks([TaskTxn(0, 4000, 0, 10), TaskTxn(1, 4001, 0, 5, 2)]))
    assert [t.transactional_id for t in completer_of(d).committed] == [
        "kclient-eos.orders.0",
        "kclient-eos.orders.1.a2",
    ]
    assert store_of(d).saved[1].txns[1].attempt == 2


def test_the_retrys_id_survives_a_driver_restart_between_record_and_commit() -> None:
    backend = MetadataDroppingOffsets()
    GroupOffsetsStore(backend, SINK).save(SinkState(RECORDED, 7, txns=(TaskTxn(0, 12, 4, 9, 3),)))
    d = ExactlyOnceDriver(SINK, GroupOffsetsStore(backend, SINK), FakeCompleter())
    assert d.run_batch(7, 1, Tasks()).action == "completed"
    assert completer_of(d).committed == [PreparedTxn("kclient-eos.orders.0.a3", 12, 4)]


def test_a_batch_recorded_by_an_earlier_version_commits_under_the_ids_it_used() -> None:
    """Earlier versions recorded ``(producer id + 1) << 16 | epoch`` and used one id per
    task for every attempt: read back as attempt 0, whose id has no suffix."""
    backend = MetadataDroppingOffsets()
    backend.offsets["kclient-eos.orders.task-0"] = (4000 + 1) << 16 | 2
    backend.offsets["kclient-eos.orders"] = 7 << 20 | 1 << 2 | 2  # R 7, one task slot
    d = ExactlyOnceDriver(SINK, GroupOffsetsStore(backend, SINK), FakeCompleter())
    assert d.run_batch(7, 1, Tasks()).action == "completed"
    assert completer_of(d).committed == [PreparedTxn("kclient-eos.orders.0", 4000, 2)]


def test_transactional_ids_per_attempt_are_bounded() -> None:
    assert transactional_id(SINK, 3) == "kclient-eos.orders.3"
    assert transactional_id(SINK, 3, 1) == "kclient-eos.orders.3.a1"
    assert transactional_id(SINK, 3, 255) == transactional_id(SINK, 3, 1000)  # shared from 255
    longest = transactional_id("s" * 100, 2**18 - 1, 10**6)
    assert len(longest) <= 125
