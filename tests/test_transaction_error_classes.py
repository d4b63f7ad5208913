"""KIP-1050's transaction error classes: every error a transactional call can raise is an
instance of exactly one of the five, and it is the class that says what the caller does.

The calls run on the scripted transaction coordinator of ``test_producer_transactions``
(the producer's I/O thread runs; no sockets, no sleeps).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from kclient import KafkaProducer, errors
from kclient.errors import (
    TRANSACTION_ERROR_CLASSES,
    AbortableTransactionError,
    ApplicationRecoverableError,
    FatalTransactionError,
    KafkaError,
    RefreshRetriableTransactionError,
    RetriableTransactionError,
    transaction_error_class,
)
from kclient.protocol import ApiKey
from kclient.sender.txn_completion import TransactionNotCompletedError
from tests.sender.txn_helpers import TXN_ID
from tests.test_producer_transactions import LiveTxnBroker

END = ApiKey.END_TXN


def _error_classes() -> list[type[KafkaError]]:
    """Every concrete error class a transactional call may raise: kclient.errors' own
    (less the roots), every broker code's, an unknown code's, and the KIP-939 one."""
    own = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, KafkaError)
        and cls not in (KafkaError, errors.BrokerResponseError, *TRANSACTION_ERROR_CLASSES)
    ]
    codes = list(errors.all_codes().values())
    return [*own, *codes, errors.for_code(9999), TransactionNotCompletedError]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_is_in_exactly_one_transaction_error_class(
    cls: type[KafkaError],
) -> None:
    matching = [base for base in TRANSACTION_ERROR_CLASSES if issubclass(cls, base)]
    assert len(matching) == 1, (cls, matching)


def test_every_broker_code_has_a_class_and_the_retriable_ones_are_retried() -> None:
    for code, cls in errors.all_codes().items():
        kind = transaction_error_class(cls())
        assert kind is not None, code
        if cls.retriable:  # the flag and the class agree
            assert kind in (RetriableTransactionError, RefreshRetriableTransactionError), code
        else:
            assert kind not in (RetriableTransactionError, RefreshRetriableTransactionError), code


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (errors.KafkaTimeoutError("x"), RetriableTransactionError),
        (errors.BufferExhaustedError("x"), RetriableTransactionError),
        (errors.ConcurrentTransactionsError(), RetriableTransactionError),
        (errors.NotCoordinatorError(), RefreshRetriableTransactionError),
        (errors.CoordinatorNotAvailableError(), RefreshRetriableTransactionError),
        (errors.NotLeaderOrFollowerError(), RefreshRetriableTransactionError),
        (errors.TransactionRequiresAbortError("x"), AbortableTransactionError),
        (errors.TransactionAbortedError("x"), AbortableTransactionError),
        (errors.TransactionAbortableError(), AbortableTransactionError),
        (errors.CommitFailedError("x"), AbortableTransactionError),
        (errors.TopicAuthorizationFailedError(), AbortableTransactionError),
        (errors.GroupAuthorizationFailedError(), AbortableTransactionError),
        (errors.RecordTooLargeError("x"), AbortableTransactionError),
        (errors.OutOfOrderSequenceNumberError(), AbortableTransactionError),
        (errors.ProducerFencedError(), ApplicationRecoverableError),
        (errors.InvalidProducerEpochError(), ApplicationRecoverableError),
        (errors.UnknownProducerIdError(), ApplicationRecoverableError),
        (errors.InvalidProducerIdMappingError(), ApplicationRecoverableError),
        (errors.TransactionalIdAuthorizationFailedError(), FatalTransactionError),
        (errors.ClusterAuthorizationFailedError(), FatalTransactionError),
        (errors.UnsupportedVersionError(), FatalTransactionError),
        (errors.InvalidTxnStateError(), ApplicationRecoverableError),
        (errors.IllegalStateError("x"), FatalTransactionError),
        (errors.ConfigError("x"), FatalTransactionError),
        (ValueError("x"), None),
    ],
)
def test_the_class_of_the_errors_users_meet(error: BaseException, kind: type | None) -> None:
    assert transaction_error_class(error) is kind
    if kind is not None:  # the one ``except`` a handler writes catches it
        with pytest.raises(kind):
            raise error


def test_existing_classes_keep_their_bases() -> None:
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.IllegalStateError, RuntimeError)
    assert issubclass(errors.KafkaTimeoutError, TimeoutError)
    assert issubclass(errors.ProducerFencedError, errors.BrokerResponseError)
    assert errors.ProducerFencedError.code == 90
    assert issubclass(errors.BootstrapRefusedError, errors.KafkaConnectionError)
    assert issubclass(errors.TransactionRequiresAbortError, KafkaError)


# ---- through the producer -----------------------------------------------------------------


@pytest.fixture
def broker() -> LiveTxnBroker:
    return LiveTxnBroker()


@pytest.fixture
def producer(broker: LiveTxnBroker) -> Iterator[KafkaProducer]:
    config = {"bootstrap.servers": "h:1", "transactional.id": TXN_ID, "linger.ms": 5}
    with KafkaProducer(config, kafka_client=broker) as p:
        p.init_transactions(timeout=10)
        yield p


def test_fencing_is_application_recoverable_everywhere(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.begin_transaction()
    producer.send("t", b"a", partition=0)
    broker.script(broker.fail_next, END, errors.ProducerFencedError.code)
    with pytest.raises(ApplicationRecoverableError):
        producer.commit_transaction(timeout=10)
    with pytest.raises(ApplicationRecoverableError):
        producer.send("t", b"b", partition=0)
    with pytest.raises(ApplicationRecoverableError):
        producer.abort_transaction(timeout=10)


def test_a_failed_record_makes_every_call_abortable_until_aborted(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.begin_transaction()
    broker.script(broker.fail_next, ApiKey.PRODUCE, errors.InvalidRecordError.code)
    with pytest.raises(AbortableTransactionError):
        producer.send("t", b"bad", partition=0).result(10)
    with pytest.raises(AbortableTransactionError):
        producer.send("t", b"next", partition=0)
    with pytest.raises(AbortableTransactionError) as raised:
        producer.commit_transaction(timeout=10)
    assert isinstance(raised.value.__cause__, errors.InvalidRecordError)
    producer.abort_transaction(timeout=10)
    producer.begin_transaction()
    producer.send("t", b"again", partition=0).result(10)
    producer.commit_transaction(timeout=10)


def test_an_error_the_producer_cannot_survive_is_raised_as_fatal_with_its_cause(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    # UNKNOWN_SERVER_ERROR alone would be abortable; from EndTxn the producer gives up
    producer.begin_transaction()
    producer.send("t", b"a", partition=0)
    broker.script(broker.fail_next, END, errors.UnknownServerError.code)
    with pytest.raises(FatalTransactionError) as raised:
        producer.commit_transaction(timeout=10)
    assert isinstance(raised.value.__cause__, errors.UnknownServerError)
    with pytest.raises(FatalTransactionError):
        producer.send("t", b"b", partition=0)
    with pytest.raises(FatalTransactionError):
        producer.abort_transaction(timeout=10)


def test_a_timed_out_call_is_retriable_and_a_call_out_of_order_fatal(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.begin_transaction()
    producer.send("t", b"a", partition=0)
    broker.script(broker.hold, END)
    with pytest.raises(RetriableTransactionError):
        producer.commit_transaction(timeout=0.05)
    broker.release(END)
    producer.commit_transaction(timeout=10)  # retried: the same call again
    with pytest.raises(FatalTransactionError):  # IllegalStateError: a bug of the caller
        producer.commit_transaction(timeout=10)
    producer.begin_transaction()  # the producer itself is fine
    producer.abort_transaction(timeout=10)


def test_the_documented_handler_goes_on_after_an_abortable_error(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    """The loop of docs/guide/transactions.md "Handling transaction errors by class"."""
    broker.script(broker.fail_next, ApiKey.PRODUCE, errors.InvalidRecordError.code)
    committed = []
    for batch in ([b"a", b"b"], [b"c"]):
        for _attempt in range(3):
            producer.begin_transaction()
            try:
                for value in batch:
                    producer.send("t", value, partition=0)
                producer.commit_transaction(timeout=10)
            except AbortableTransactionError:
                producer.abort_transaction(timeout=10)
                continue
            committed.append(batch)
            break
    assert committed == [[b"a", b"b"], [b"c"]]


@pytest.mark.parametrize(
    "code", [errors.TransactionAbortableError.code, errors.UnknownProducerIdError.code]
)
def test_abort_transaction_never_raises_an_abortable_error(
    producer: KafkaProducer, broker: LiveTxnBroker, code: int
) -> None:
    """An abortable error from abort_transaction would loop a handler that aborts on it
    (Java's KAFKA-19250): the abort ends the transaction by an epoch bump instead."""
    producer.begin_transaction()
    producer.send("t", b"a", partition=0).result(10)
    broker.script(broker.fail_next, END, code)
    try:
        producer.abort_transaction(timeout=10)
    except AbortableTransactionError:  # pragma: no cover (the failure this test is for)
        pytest.fail("abort_transaction raised an abortable error")
    producer.begin_transaction()
    producer.send("t", b"b", partition=0)
    producer.commit_transaction(timeout=10)
