"""aiokafka's error names (``aiokafka.errors``) over kclient's own error classes.

Code written for aiokafka changes its import, and its ``except`` clauses catch what kclient
raises::

    from kclient.aio.errors import KafkaError, KafkaTimeoutError

    try:
        await producer.send_and_wait("events", b"x")
    except KafkaTimeoutError:
        ...

Every name here *is* a class of ``kclient.errors`` where kclient has the error (so
``KafkaTimeoutError`` is ``kclient.errors.KafkaTimeoutError``, and a broker's error code is
the class of that code whatever aiokafka calls it: ``NotLeaderForPartitionError`` is
``NotLeaderOrFollowerError``, code 6). The hierarchy is kclient's: ``KafkaError`` above all
of them, ``BrokerResponseError`` above every broker code, and each broker error class
carries aiokafka's ``errno`` and ``message`` (the code and its Kafka name) besides
kclient's ``code`` and ``name``. Where aiokafka has a class kclient never raises (its
consumer's and its own client's: ``NodeNotReadyError``, ``StaleMetadata``,
``ConsumerStoppedError`` ...) the name is a class of its own here, under ``KafkaError`` as in
aiokafka, so that an ``except`` naming it is valid and catches nothing by mistake.

Differences: kclient's ``KafkaError`` derives from ``Exception``, aiokafka's from
``RuntimeError``; kclient raises ``IllegalStateError`` where aiokafka raises
``ProducerClosed`` (a send after ``stop()``), so ``ProducerClosed`` is that class here;
``NoBrokersAvailable`` is the error of every bootstrap address refusing
(``BootstrapRefusedError``). KIP-1050's transaction error classes are here too
(``AbortableTransactionError``, ``ApplicationRecoverableError``, ``FatalTransactionError``,
``RetriableTransactionError``, ``RefreshRetriableTransactionError``: kclient's, which
aiokafka does not have), for ``except`` clauses around ``transaction()``.
kafka-python's ``kafka.errors`` uses the same names. Not a Kafka component: the names only.
"""

from __future__ import annotations

from kclient import errors as _errors
from kclient.errors import (
    AbortableTransactionError,
    ApplicationRecoverableError,
    BrokerResponseError,
    CommitFailedError,
    FatalTransactionError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    RefreshRetriableTransactionError,
    RetriableTransactionError,
    UnsupportedCodecError,
)
from kclient.network.bootstrap_refusals import BootstrapRefusedError

# ---- aiokafka's client-side errors, as the kclient class that stands for each ------------

IllegalStateError = _errors.IllegalStateError
KafkaConfigurationError = _errors.ConfigError
KafkaProtocolError = _errors.ProtocolDecodeError
AuthenticationFailedError = _errors.SaslAuthenticationError
ProducerFenced = _errors.ProducerFencedError
ProducerClosed = _errors.IllegalStateError
NoBrokersAvailable = BootstrapRefusedError
"""What ``start()`` and the first ``send`` raise when every bootstrap address refuses (a
``KafkaConnectionError`` and a ``KafkaTimeoutError`` too); kafka-python's name for it."""


# ---- aiokafka's errors kclient never raises: classes of their own -------------------------


class IllegalArgumentError(KafkaError, ValueError):
    """aiokafka's name; kclient raises ``ValueError``/``TypeError`` for a bad argument."""


class NodeNotReadyError(KafkaError):
    """aiokafka's client's name; not raised by kclient."""

    retriable = True


class CorrelationIdError(KafkaProtocolError):
    """aiokafka's name; kclient raises ``ProtocolDecodeError`` for a mismatched answer."""

    retriable = True


class Cancelled(KafkaError):
    """aiokafka's client's name; not raised by kclient."""

    retriable = True


class TooManyInFlightRequests(KafkaError):
    """aiokafka's client's name; not raised by kclient."""

    retriable = True


class StaleMetadata(KafkaError):
    """aiokafka's client's name; not raised by kclient."""

    retriable = True
    invalid_metadata = True


class MetadataEmptyBrokerList(KafkaError):
    """aiokafka's client's name; not raised by kclient."""

    retriable = True


class UnrecognizedBrokerVersion(KafkaError):
    """aiokafka's name; kclient raises ``UnsupportedVersionError``."""


class IncompatibleBrokerVersion(KafkaError):
    """aiokafka's name; kclient raises ``UnsupportedVersionError``."""


class AuthenticationMethodNotSupported(KafkaError):
    """aiokafka's name; kclient raises ``ConfigError`` for an unsupported mechanism."""


class KafkaUnavailableError(KafkaError):
    """aiokafka's client's name; not raised by kclient."""


class QuotaViolationError(KafkaError):
    """aiokafka's name; not raised by kclient (a throttled request waits instead)."""


class NoOffsetForPartitionError(KafkaError):
    """aiokafka's consumer's name; kclient has no consumer."""


class ConsumerStoppedError(Exception):
    """aiokafka's consumer's name (not a ``KafkaError`` there either); kclient has no
    consumer."""


class IllegalOperation(Exception):
    """aiokafka's name (not a ``KafkaError`` there either); not raised by kclient."""


class NoError(BrokerResponseError):
    """Error code 0: no error. aiokafka's name; never raised."""

    code = 0
    name = "NONE"
    errno = 0
    message = "NO_ERROR"


# ---- broker error codes: aiokafka's name for each code -> kclient's class of that code ----


def for_code(code: int) -> type[BrokerResponseError]:
    """The class of a broker error code (``NoError`` for 0), as aiokafka's ``for_code``."""
    return NoError if code == 0 else _errors.for_code(code)


UnknownError = for_code(-1)
OffsetOutOfRangeError = for_code(1)
CorruptRecordException = for_code(2)
InvalidMessageError = for_code(2)
UnknownTopicOrPartitionError = for_code(3)
InvalidFetchRequestError = for_code(4)
LeaderNotAvailableError = for_code(5)
NotLeaderForPartitionError = for_code(6)
RequestTimedOutError = for_code(7)
BrokerNotAvailableError = for_code(8)
ReplicaNotAvailableError = for_code(9)
MessageSizeTooLargeError = for_code(10)
StaleControllerEpochError = for_code(11)
OffsetMetadataTooLargeError = for_code(12)
StaleLeaderEpochCodeError = for_code(13)
GroupLoadInProgressError = for_code(14)
CoordinatorLoadInProgressError = for_code(14)
GroupCoordinatorNotAvailableError = for_code(15)
CoordinatorNotAvailableError = for_code(15)
NotCoordinatorForGroupError = for_code(16)
NotCoordinatorError = for_code(16)
InvalidTopicError = for_code(17)
RecordListTooLargeError = for_code(18)
NotEnoughReplicasError = for_code(19)
NotEnoughReplicasAfterAppendError = for_code(20)
InvalidRequiredAcksError = for_code(21)
IllegalGenerationError = for_code(22)
InconsistentGroupProtocolError = for_code(23)
InvalidGroupIdError = for_code(24)
UnknownMemberIdError = for_code(25)
InvalidSessionTimeoutError = for_code(26)
RebalanceInProgressError = for_code(27)
InvalidCommitOffsetSizeError = for_code(28)
TopicAuthorizationFailedError = for_code(29)
GroupAuthorizationFailedError = for_code(30)
ClusterAuthorizationFailedError = for_code(31)
InvalidTimestampError = for_code(32)
UnsupportedSaslMechanismError = for_code(33)
IllegalSaslStateError = for_code(34)
UnsupportedVersionError = for_code(35)
TopicAlreadyExistsError = for_code(36)
InvalidPartitionsError = for_code(37)
InvalidReplicationFactorError = for_code(38)
InvalidReplicationAssignmentError = for_code(39)
InvalidConfigurationError = for_code(40)
NotControllerError = for_code(41)
InvalidRequestError = for_code(42)
UnsupportedForMessageFormatError = for_code(43)
PolicyViolationError = for_code(44)
OutOfOrderSequenceNumber = for_code(45)
DuplicateSequenceNumber = for_code(46)
InvalidProducerEpoch = for_code(47)
InvalidTxnState = for_code(48)
InvalidProducerIdMapping = for_code(49)
InvalidTransactionTimeout = for_code(50)
ConcurrentTransactions = for_code(51)
TransactionCoordinatorFenced = for_code(52)
TransactionalIdAuthorizationFailed = for_code(53)
SecurityDisabled = for_code(54)
OperationNotAttempted = for_code(55)
KafkaStorageError = for_code(56)
LogDirNotFound = for_code(57)
SaslAuthenticationFailed = for_code(58)
UnknownProducerId = for_code(59)
ReassignmentInProgress = for_code(60)
DelegationTokenAuthDisabled = for_code(61)
DelegationTokenNotFound = for_code(62)
DelegationTokenOwnerMismatch = for_code(63)
DelegationTokenRequestNotAllowed = for_code(64)
DelegationTokenAuthorizationFailed = for_code(65)
DelegationTokenExpired = for_code(66)
InvalidPrincipalType = for_code(67)
NonEmptyGroup = for_code(68)
GroupIdNotFound = for_code(69)
FetchSessionIdNotFound = for_code(70)
InvalidFetchSessionEpoch = for_code(71)
ListenerNotFound = for_code(72)
MemberIdRequired = for_code(79)

__all__ = [
    "AbortableTransactionError",
    "ApplicationRecoverableError",
    "AuthenticationFailedError",
    "AuthenticationMethodNotSupported",
    "BrokerNotAvailableError",
    "BrokerResponseError",
    "Cancelled",
    "ClusterAuthorizationFailedError",
    "CommitFailedError",
    "ConcurrentTransactions",
    "ConsumerStoppedError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorrelationIdError",
    "CorruptRecordException",
    "DelegationTokenAuthDisabled",
    "DelegationTokenAuthorizationFailed",
    "DelegationTokenExpired",
    "DelegationTokenNotFound",
    "DelegationTokenOwnerMismatch",
    "DelegationTokenRequestNotAllowed",
    "DuplicateSequenceNumber",
    "FatalTransactionError",
    "FetchSessionIdNotFound",
    "GroupAuthorizationFailedError",
    "GroupCoordinatorNotAvailableError",
    "GroupIdNotFound",
    "GroupLoadInProgressError",
    "IllegalArgumentError",
    "IllegalGenerationError",
    "IllegalOperation",
    "IllegalSaslStateError",
    "IllegalStateError",
    "IncompatibleBrokerVersion",
    "InconsistentGroupProtocolError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigurationError",
    "InvalidFetchRequestError",
    "InvalidFetchSessionEpoch",
    "InvalidGroupIdError",
    "InvalidMessageError",
    "InvalidPartitionsError",
    "InvalidPrincipalType",
    "InvalidProducerEpoch",
    "InvalidProducerIdMapping",
    "InvalidReplicationAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeout",
    "InvalidTxnState",
    "KafkaConfigurationError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaProtocolError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "KafkaUnavailableError",
    "LeaderNotAvailableError",
    "ListenerNotFound",
    "LogDirNotFound",
    "MemberIdRequired",
    "MessageSizeTooLargeError",
    "MetadataEmptyBrokerList",
    "NoBrokersAvailable",
    "NoError",
    "NoOffsetForPartitionError",
    "NodeNotReadyError",
    "NonEmptyGroup",
    "NotControllerError",
    "NotCoordinatorError",
    "NotCoordinatorForGroupError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderForPartitionError",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "OperationNotAttempted",
    "OutOfOrderSequenceNumber",
    "PolicyViolationError",
    "ProducerClosed",
    "ProducerFenced",
    "QuotaViolationError",
    "ReassignmentInProgress",
    "RebalanceInProgressError",
    "RecordListTooLargeError",
    "RecordTooLargeError",
    "RefreshRetriableTransactionError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "RetriableTransactionError",
    "SaslAuthenticationFailed",
    "SecurityDisabled",
    "StaleControllerEpochError",
    "StaleLeaderEpochCodeError",
    "StaleMetadata",
    "TooManyInFlightRequests",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TransactionCoordinatorFenced",
    "TransactionalIdAuthorizationFailed",
    "UnknownError",
    "UnknownMemberIdError",
    "UnknownProducerId",
    "UnknownTopicOrPartitionError",
    "UnrecognizedBrokerVersion",
    "UnsupportedCodecError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "for_code",
]
