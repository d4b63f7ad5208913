"""The kclient error tree and the one table of Kafka broker error codes.

Two families, as in h11: errors the *caller* caused (``ConfigError``, ``IllegalStateError``,
``RecordTooLargeError``) and errors the *peer* caused (``ProtocolDecodeError``,
``CorruptRecordError``, and every ``BrokerResponseError`` a broker returns by code).

Broker error codes live in a single table below (``_define`` lines): name, code,
whether a retry may succeed (``retriable``) and whether the client's metadata is
probably stale (``invalid_metadata``). ``for_code(code)`` gives the class for a code.
"""

from __future__ import annotations

from typing import Any


class KafkaError(Exception):
    """Base of every error kclient raises."""

    retriable: bool = False
    invalid_metadata: bool = False


# ---- KIP-1050: what a transactional producer's user does next -----------------------------


class RetriableTransactionError(KafkaError):
    """KIP-1050's retriable class (Java's ``RetriableException``): the call may succeed if
    made again, e.g. a ``KafkaTimeoutError`` of ``commit_transaction``, which a second
    call resumes. Base of ``KafkaTimeoutError``, ``KafkaConnectionError`` and the broker
    codes marked ``retriable`` that are not ``RefreshRetriableTransactionError``."""


class RefreshRetriableTransactionError(KafkaError):
    """KIP-1050's refresh-retriable class (Java's ``RefreshRetriableException``): the
    client's metadata or coordinator was stale. kclient refreshes them itself, so for the
    user it is handled as ``RetriableTransactionError``: make the call again. Base of the
    broker codes marked ``invalid_metadata`` and of ``NotCoordinatorError`` and
    ``CoordinatorNotAvailableError``."""


class AbortableTransactionError(KafkaError):
    """KIP-1050's abortable class (Java's ``TransactionAbortableException``): the current
    transaction cannot commit, the producer can go on. Call ``abort_transaction()``, then
    begin a new transaction (and process its input again). Base of
    ``TransactionRequiresAbortError`` (what the transactional calls raise then, its
    ``__cause__`` the error of the class the record or request failed with),
    ``TransactionAbortedError``, ``CommitFailedError``, ``RecordTooLargeError``,
    ``SerializationError`` and every non-retriable broker code not in another class (such
    as ``TransactionAbortableError``, code 120, and ``TopicAuthorizationFailedError``)."""


class ApplicationRecoverableError(KafkaError):
    """KIP-1050's application-recoverable class (Java's ``ApplicationRecoverableException``):
    this producer cannot go on, but a new one with the same ``transactional.id`` can. Close
    it, create a new producer, ``init_transactions()`` and go on from the last committed
    state. Base of ``ProducerFencedError``, ``InvalidProducerEpochError``,
    ``UnknownProducerIdError``, ``InvalidProducerIdMappingError``,
    ``TransactionalIdNotFoundError`` and ``InvalidTxnStateError`` (the coordinator and the
    producer disagree on the transaction's state; with transaction version 2 the commit of a
    transaction the coordinator timed out raises ``TransactionRequiresAbortError`` caused by
    it instead: abortable, as Java's since KAFKA-19177)."""


class FatalTransactionError(KafkaError):
    """KIP-1050's fatal class (Java's fatal ``KafkaException``): the producer is unusable
    and a new one would fail the same way until the settings, the ACLs or the code are
    fixed (authorization, a broker without the needed API version, a call out of order, a
    closed producer). Close the producer and stop. Raised as is when the producer failed
    for a reason without a class of its own (its sender thread failed; a request failed
    with an error of a milder class than its outcome: that error is the ``__cause__``).
    Base of ``IllegalStateError``, ``ConfigError``, ``SaslAuthenticationError`` and the
    broker codes for authorization, versions and invalid transaction requests."""


TRANSACTION_ERROR_CLASSES: tuple[type[KafkaError], ...] = (
    RetriableTransactionError,
    RefreshRetriableTransactionError,
    AbortableTransactionError,
    ApplicationRecoverableError,
    FatalTransactionError,
)
"""KIP-1050's five classes, in the order a handler usually tests them."""


def transaction_error_class(error: BaseException) -> type[KafkaError] | None:
    """Which of the ``TRANSACTION_ERROR_CLASSES`` ``error`` is an instance of; None for an
    error that is not a ``KafkaError`` (a ``TypeError`` or ``ValueError`` for a bad
    argument)."""
    for cls in TRANSACTION_ERROR_CLASSES:
        if isinstance(error, cls):
            return cls
    return None


# ---- caller mistakes -------------------------------------------------------------------


class ConfigError(FatalTransactionError, ValueError):
    """A setting is unknown, has the wrong type, is out of range, or conflicts with another."""


class IllegalStateError(FatalTransactionError, RuntimeError):
    """An API was used in a state that does not allow it (e.g. send after close)."""


class RecordTooLargeError(AbortableTransactionError):
    """A record is larger than ``max.request.size`` or ``buffer.memory``."""


class SerializationError(AbortableTransactionError):
    """A key or value serializer failed or returned something other than bytes."""


class SendBatchError(AbortableTransactionError):
    """Some rows of a ``send_batch`` call failed.

    ``errors`` maps row index -> the exception of that row (as ``send``'s future would
    have raised it); ``metadata`` is every row's ``RecordMetadata`` in row order, None
    for the failed rows.
    """

    def __init__(self, topic: str, errors: dict[int, BaseException], metadata: list[Any]) -> None:
        first = min(errors)
        super().__init__(
            f"{len(errors)} of {len(metadata)} records to topic {topic!r} failed; "
            f"the first, row {first}: {errors[first]!r}"
        )
        self.topic = topic
        self.errors = errors
        self.metadata = metadata

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.topic, self.errors, self.metadata))


# ---- peer faults and transport -----------------------------------------------------------


class ProtocolDecodeError(FatalTransactionError):
    """Bytes from the peer do not follow the Kafka wire protocol.

    The message names what was being read (api, version, field) and the byte offset.
    """


class ProtocolEncodeError(FatalTransactionError, ValueError):
    """A message handed to the encoder does not fit its declaration (caller's mistake)."""


class CorruptRecordError(AbortableTransactionError):
    """A record batch failed validation: bad CRC, bad sizes, unknown magic or codec."""


class DecompressedSizeError(CorruptRecordError):
    """A compressed record batch expands past the limit its reader set (the embedded
    broker's ``max.message.bytes``): refused before it takes more memory."""


class UnsupportedCodecError(FatalTransactionError):
    """A compression codec is unknown, or its optional package is not installed."""


class KafkaConnectionError(RetriableTransactionError):
    """A connection to a broker failed or was lost. Names the node and address."""

    retriable = True
    invalid_metadata = True


class KafkaTimeoutError(RetriableTransactionError, TimeoutError):
    """An operation did not finish within its deadline (names the setting that bounds it)."""

    retriable = True


class BootstrapRefusedError(KafkaConnectionError, KafkaTimeoutError):
    """Every bootstrap address refused connections for ``bootstrap.refused.timeout.ms``
    and none ever accepted one: names each address and why. A ``KafkaConnectionError``
    (what ``kclient.aio``'s ``start()`` raises) and a ``KafkaTimeoutError`` (what
    ``send`` raises when metadata does not come)."""

    retriable = False


class BootstrapResolutionError(KafkaConnectionError):
    """No name in ``bootstrap.servers`` resolved within ``bootstrap.resolve.timeout.ms``
    (KIP-909; Java's ``BootstrapResolutionException``). Final, as in Java: every later
    call fails with it; fix DNS or ``bootstrap.servers`` and create the producer again."""

    retriable = False


class SaslAuthenticationError(FatalTransactionError):
    """SASL authentication failed: wrong credentials, a mechanism the broker does not
    enable, or a broker that cannot prove it knows the password. Not retried: sends fail
    with it until the settings are fixed (Java's ``SaslAuthenticationException``)."""

    retriable = False


class BufferExhaustedError(KafkaTimeoutError):
    """``buffer.memory`` stayed full for ``max.block.ms``."""


# ---- transactions (a transactional producer's own states) --------------------------------


class TransactionAbortedError(AbortableTransactionError):
    """A record's transaction was aborted before the record was sent (Java's
    ``TransactionAbortedException``): it was never written. Send it again in a new
    transaction if it is still wanted."""


class TransactionRequiresAbortError(AbortableTransactionError):
    """The current transaction hit an error it cannot recover from (its ``__cause__`` says
    which), but the producer can go on: call ``abort_transaction()``, then begin a new
    transaction. Raised by ``send``, ``send_offsets_to_transaction`` and
    ``commit_transaction`` until the transaction is aborted (librdkafka's
    ``txn_requires_abort``)."""


class CommitFailedError(AbortableTransactionError):
    """The group coordinator refused the offsets of ``send_offsets_to_transaction`` because
    the consumer's group membership it names is stale (Java's ``CommitFailedException``);
    the transaction must be aborted."""


# ---- broker error codes -----------------------------------------------------------------


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses exist for every known code."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    #: aiokafka's and kafka-python's names for ``code`` and ``name`` (``kclient.aio.errors``)
    errno: int = -1
    message: str = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str = "") -> None:
        text = f"[Error {self.code}] {self.name}"
        super().__init__(f"{text}: {message}" if message else text)
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.detail,))


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _class_name(name: str) -> str:
    camel = "".join(part.capitalize() for part in name.split("_"))
    return camel if camel.endswith(("Error", "Exception")) else camel + "Error"


def _default_txn_class(retriable: bool, invalid_metadata: bool) -> type[KafkaError]:
    """A broker code's KIP-1050 class unless its ``_define`` line names one: refresh-retriable
    for stale metadata, retriable, else abortable (a transactional producer aborts the
    transaction of a record or request that failed with any other code)."""
    if retriable:
        return RefreshRetriableTransactionError if invalid_metadata else RetriableTransactionError
    return AbortableTransactionError


def _define(
    name: str,
    code: int,
    *,
    retriable: bool = False,
    invalid_metadata: bool = False,
    txn: type[KafkaError] | None = None,
) -> type[BrokerResponseError]:
    """The class of broker error ``code``; ``txn`` is its KIP-1050 class (an extra base)
    when not the one ``_default_txn_class`` gives."""
    if txn is None:
        txn = _default_txn_class(retriable, invalid_metadata)
    cls = type(
        _class_name(name),
        (BrokerResponseError, txn),
        {
            "code": code,
            "name": name,
            "errno": code,
            "message": name,
            "retriable": retriable,
            "invalid_metadata": invalid_metadata,
            "__module__": __name__,
            "__doc__": f"Kafka error code {code}: {name} ({txn.__name__}).",
        },
    )
    _BY_CODE[code] = cls
    return cls


_REFRESH = RefreshRetriableTransactionError
_RECOVERABLE = ApplicationRecoverableError
_FATAL = FatalTransactionError

# fmt: off
UnknownServerError = _define("UNKNOWN_SERVER_ERROR", -1)
OffsetOutOfRangeError = _define("OFFSET_OUT_OF_RANGE", 1)
CorruptMessageError = _define("CORRUPT_MESSAGE", 2, retriable=True)
UnknownTopicOrPartitionError = _define("UNKNOWN_TOPIC_OR_PARTITION", 3, retriable=True, invalid_metadata=True)  # noqa: E501
InvalidFetchSizeError = _define("INVALID_FETCH_SIZE", 4)
LeaderNotAvailableError = _define("LEADER_NOT_AVAILABLE", 5, retriable=True, invalid_metadata=True)
NotLeaderOrFollowerError = _define("NOT_LEADER_OR_FOLLOWER", 6, retriable=True, invalid_metadata=True)  # noqa: E501
RequestTimedOutError = _define("REQUEST_TIMED_OUT", 7, retriable=True)
BrokerNotAvailableError = _define("BROKER_NOT_AVAILABLE", 8)
ReplicaNotAvailableError = _define("REPLICA_NOT_AVAILABLE", 9, retriable=True, invalid_metadata=True)  # noqa: E501
MessageTooLargeError = _define("MESSAGE_TOO_LARGE", 10)
StaleControllerEpochError = _define("STALE_CONTROLLER_EPOCH", 11)
OffsetMetadataTooLargeError = _define("OFFSET_METADATA_TOO_LARGE", 12)
NetworkExceptionError = _define("NETWORK_EXCEPTION", 13, retriable=True, invalid_metadata=True)
CoordinatorLoadInProgressError = _define("COORDINATOR_LOAD_IN_PROGRESS", 14, retriable=True)
CoordinatorNotAvailableError = _define("COORDINATOR_NOT_AVAILABLE", 15, retriable=True, txn=_REFRESH)  # noqa: E501
NotCoordinatorError = _define("NOT_COORDINATOR", 16, retriable=True, txn=_REFRESH)
InvalidTopicError = _define("INVALID_TOPIC_EXCEPTION", 17)
RecordListTooLargeError = _define("RECORD_LIST_TOO_LARGE", 18)
NotEnoughReplicasError = _define("NOT_ENOUGH_REPLICAS", 19, retriable=True)
NotEnoughReplicasAfterAppendError = _define("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, retriable=True)
InvalidRequiredAcksError = _define("INVALID_REQUIRED_ACKS", 21, txn=_FATAL)
IllegalGenerationError = _define("ILLEGAL_GENERATION", 22)
InconsistentGroupProtocolError = _define("INCONSISTENT_GROUP_PROTOCOL", 23)
InvalidGroupIdError = _define("INVALID_GROUP_ID", 24)
UnknownMemberIdError = _define("UNKNOWN_MEMBER_ID", 25)
InvalidSessionTimeoutError = _define("INVALID_SESSION_TIMEOUT", 26)
RebalanceInProgressError = _define("REBALANCE_IN_PROGRESS", 27)
InvalidCommitOffsetSizeError = _define("INVALID_COMMIT_OFFSET_SIZE", 28)
TopicAuthorizationFailedError = _define("TOPIC_AUTHORIZATION_FAILED", 29)
GroupAuthorizationFailedError = _define("GROUP_AUTHORIZATION_FAILED", 30)
ClusterAuthorizationFailedError = _define("CLUSTER_AUTHORIZATION_FAILED", 31, txn=_FATAL)
InvalidTimestampError = _define("INVALID_TIMESTAMP", 32)
UnsupportedSaslMechanismError = _define("UNSUPPORTED_SASL_MECHANISM", 33, txn=_FATAL)
IllegalSaslStateError = _define("ILLEGAL_SASL_STATE", 34, txn=_FATAL)
UnsupportedVersionError = _define("UNSUPPORTED_VERSION", 35, txn=_FATAL)
TopicAlreadyExistsError = _define("TOPIC_ALREADY_EXISTS", 36)
InvalidPartitionsError = _define("INVALID_PARTITIONS", 37)
InvalidReplicationFactorError = _define("INVALID_REPLICATION_FACTOR", 38)
InvalidReplicaAssignmentError = _define("INVALID_REPLICA_ASSIGNMENT", 39)
InvalidConfigError = _define("INVALID_CONFIG", 40)
NotControllerError = _define("NOT_CONTROLLER", 41, retriable=True)
InvalidRequestError = _define("INVALID_REQUEST", 42, txn=_FATAL)
UnsupportedForMessageFormatError = _define("UNSUPPORTED_FOR_MESSAGE_FORMAT", 43, txn=_FATAL)
PolicyViolationError = _define("POLICY_VIOLATION", 44)
OutOfOrderSequenceNumberError = _define("OUT_OF_ORDER_SEQUENCE_NUMBER", 45)
DuplicateSequenceNumberError = _define("DUPLICATE_SEQUENCE_NUMBER", 46)
InvalidProducerEpochError = _define("INVALID_PRODUCER_EPOCH", 47, txn=_RECOVERABLE)
InvalidTxnStateError = _define("INVALID_TXN_STATE", 48, txn=_RECOVERABLE)
InvalidProducerIdMappingError = _define("INVALID_PRODUCER_ID_MAPPING", 49, txn=_RECOVERABLE)
InvalidTransactionTimeoutError = _define("INVALID_TRANSACTION_TIMEOUT", 50, txn=_FATAL)
ConcurrentTransactionsError = _define("CONCURRENT_TRANSACTIONS", 51, retriable=True)
TransactionCoordinatorFencedError = _define("TRANSACTION_COORDINATOR_FENCED", 52, txn=_FATAL)
TransactionalIdAuthorizationFailedError = _define("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53, txn=_FATAL)  # noqa: E501
SecurityDisabledError = _define("SECURITY_DISABLED", 54, txn=_FATAL)
OperationNotAttemptedError = _define("OPERATION_NOT_ATTEMPTED", 55)
KafkaStorageError = _define("KAFKA_STORAGE_ERROR", 56, retriable=True, invalid_metadata=True)
LogDirNotFoundError = _define("LOG_DIR_NOT_FOUND", 57)
SaslAuthenticationFailedError = _define("SASL_AUTHENTICATION_FAILED", 58, txn=_FATAL)
UnknownProducerIdError = _define("UNKNOWN_PRODUCER_ID", 59, txn=_RECOVERABLE)
ReassignmentInProgressError = _define("REASSIGNMENT_IN_PROGRESS", 60)
DelegationTokenAuthDisabledError = _define("DELEGATION_TOKEN_AUTH_DISABLED", 61)
DelegationTokenNotFoundError = _define("DELEGATION_TOKEN_NOT_FOUND", 62)
DelegationTokenOwnerMismatchError = _define("DELEGATION_TOKEN_OWNER_MISMATCH", 63)
DelegationTokenRequestNotAllowedError = _define("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", 64)
DelegationTokenAuthorizationFailedError = _define("DELEGATION_TOKEN_AUTHORIZATION_FAILED", 65)
DelegationTokenExpiredError = _define("DELEGATION_TOKEN_EXPIRED", 66)
InvalidPrincipalTypeError = _define("INVALID_PRINCIPAL_TYPE", 67)
NonEmptyGroupError = _define("NON_EMPTY_GROUP", 68)
GroupIdNotFoundError = _define("GROUP_ID_NOT_FOUND", 69)
FetchSessionIdNotFoundError = _define("FETCH_SESSION_ID_NOT_FOUND", 70, retriable=True)
InvalidFetchSessionEpochError = _define("INVALID_FETCH_SESSION_EPOCH", 71, retriable=True)
ListenerNotFoundError = _define("LISTENER_NOT_FOUND", 72, retriable=True, invalid_metadata=True)
TopicDeletionDisabledError = _define("TOPIC_DELETION_DISABLED", 73)
FencedLeaderEpochError = _define("FENCED_LEADER_EPOCH", 74, retriable=True, invalid_metadata=True)
UnknownLeaderEpochError = _define("UNKNOWN_LEADER_EPOCH", 75, retriable=True)
UnsupportedCompressionTypeError = _define("UNSUPPORTED_COMPRESSION_TYPE", 76)
StaleBrokerEpochError = _define("STALE_BROKER_EPOCH", 77)
OffsetNotAvailableError = _define("OFFSET_NOT_AVAILABLE", 78, retriable=True)
MemberIdRequiredError = _define("MEMBER_ID_REQUIRED", 79)
PreferredLeaderNotAvailableError = _define("PREFERRED_LEADER_NOT_AVAILABLE", 80, retriable=True)
GroupMaxSizeReachedError = _define("GROUP_MAX_SIZE_REACHED", 81)
FencedInstanceIdError = _define("FENCED_INSTANCE_ID", 82)
EligibleLeadersNotAvailableError = _define("ELIGIBLE_LEADERS_NOT_AVAILABLE", 83, retriable=True)
ElectionNotNeededError = _define("ELECTION_NOT_NEEDED", 84, retriable=True)
NoReassignmentInProgressError = _define("NO_REASSIGNMENT_IN_PROGRESS", 85)
GroupSubscribedToTopicError = _define("GROUP_SUBSCRIBED_TO_TOPIC", 86)
InvalidRecordError = _define("INVALID_RECORD", 87)
UnstableOffsetCommitError = _define("UNSTABLE_OFFSET_COMMIT", 88, retriable=True)
ThrottlingQuotaExceededError = _define("THROTTLING_QUOTA_EXCEEDED", 89, retriable=True)
ProducerFencedError = _define("PRODUCER_FENCED", 90, txn=_RECOVERABLE)
ResourceNotFoundError = _define("RESOURCE_NOT_FOUND", 91)
DuplicateResourceError = _define("DUPLICATE_RESOURCE", 92)
UnacceptableCredentialError = _define("UNACCEPTABLE_CREDENTIAL", 93)
InconsistentVoterSetError = _define("INCONSISTENT_VOTER_SET", 94)
InvalidUpdateVersionError = _define("INVALID_UPDATE_VERSION", 95)
FeatureUpdateFailedError = _define("FEATURE_UPDATE_FAILED", 96)
PrincipalDeserializationFailureError = _define("PRINCIPAL_DESERIALIZATION_FAILURE", 97)
SnapshotNotFoundError = _define("SNAPSHOT_NOT_FOUND", 98)
PositionOutOfRangeError = _define("POSITION_OUT_OF_RANGE", 99)
UnknownTopicIdError = _define("UNKNOWN_TOPIC_ID", 100, retriable=True, invalid_metadata=True)
DuplicateBrokerRegistrationError = _define("DUPLICATE_BROKER_REGISTRATION", 101)
BrokerIdNotRegisteredError = _define("BROKER_ID_NOT_REGISTERED", 102)
InconsistentTopicIdError = _define("INCONSISTENT_TOPIC_ID", 103, retriable=True, invalid_metadata=True)  # noqa: E501
InconsistentClusterIdError = _define("INCONSISTENT_CLUSTER_ID", 104)
TransactionalIdNotFoundError = _define("TRANSACTIONAL_ID_NOT_FOUND", 105, txn=_RECOVERABLE)
FetchSessionTopicIdError = _define("FETCH_SESSION_TOPIC_ID_ERROR", 106, retriable=True)
IneligibleReplicaError = _define("INELIGIBLE_REPLICA", 107)
NewLeaderElectedError = _define("NEW_LEADER_ELECTED", 108)
OffsetMovedToTieredStorageError = _define("OFFSET_MOVED_TO_TIERED_STORAGE", 109)
FencedMemberEpochError = _define("FENCED_MEMBER_EPOCH", 110)
UnreleasedInstanceIdError = _define("UNRELEASED_INSTANCE_ID", 111)
UnsupportedAssignorError = _define("UNSUPPORTED_ASSIGNOR", 112)
StaleMemberEpochError = _define("STALE_MEMBER_EPOCH", 113)
MismatchedEndpointTypeError = _define("MISMATCHED_ENDPOINT_TYPE", 114)
UnsupportedEndpointTypeError = _define("UNSUPPORTED_ENDPOINT_TYPE", 115)
UnknownControllerIdError = _define("UNKNOWN_CONTROLLER_ID", 116)
UnknownSubscriptionIdError = _define("UNKNOWN_SUBSCRIPTION_ID", 117)
TelemetryTooLargeError = _define("TELEMETRY_TOO_LARGE", 118)
InvalidRegistrationError = _define("INVALID_REGISTRATION", 119)
TransactionAbortableError = _define("TRANSACTION_ABORTABLE", 120)
InvalidRecordStateError = _define("INVALID_RECORD_STATE", 121)
ShareSessionNotFoundError = _define("SHARE_SESSION_NOT_FOUND", 122)
InvalidShareSessionEpochError = _define("INVALID_SHARE_SESSION_EPOCH", 123)
FencedStateEpochError = _define("FENCED_STATE_EPOCH", 124)
InvalidVoterKeyError = _define("INVALID_VOTER_KEY", 125)
DuplicateVoterError = _define("DUPLICATE_VOTER", 126)
VoterNotFoundError = _define("VOTER_NOT_FOUND", 127)
InvalidRegularExpressionError = _define("INVALID_REGULAR_EXPRESSION", 128)
RebootstrapRequiredError = _define("REBOOTSTRAP_REQUIRED", 129)  # KIP-1102, KIP-1242
StreamsInvalidTopologyError = _define("STREAMS_INVALID_TOPOLOGY", 130)
StreamsInvalidTopologyEpochError = _define("STREAMS_INVALID_TOPOLOGY_EPOCH", 131)
StreamsTopologyFencedError = _define("STREAMS_TOPOLOGY_FENCED", 132)
ShareSessionLimitReachedError = _define("SHARE_SESSION_LIMIT_REACHED", 133)
# fmt: on


def for_code(code: int) -> type[BrokerResponseError]:
    """The error class for a broker error code (an ad-hoc subclass for unknown codes, an
    ``AbortableTransactionError`` as a non-retriable code is)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type(
            f"UnknownKafkaErrorCode{code & 0xFFFF}",
            (BrokerResponseError, AbortableTransactionError),
            {
                "code": code,
                "name": f"UNKNOWN_ERROR_CODE_{code}",
                "errno": code,
                "message": f"UNKNOWN_ERROR_CODE_{code}",
                "__module__": __name__,
            },
        )
    return cls


def error_name(code: int) -> str:
    """``'NONE'`` for 0, otherwise the Kafka name of the code."""
    return "NONE" if code == 0 else for_code(code).name


def all_codes() -> dict[int, type[BrokerResponseError]]:
    """Every known broker error code and its class (a copy)."""
    return dict(_BY_CODE)
