import pickle

import pytest

from kclient import errors


def test_every_code_maps_to_its_own_class_with_flags() -> None:
    cls = errors.for_code(6)
    assert cls is errors.NotLeaderOrFollowerError
    assert cls.retriable and cls.invalid_metadata
    assert errors.for_code(10) is errors.MessageTooLargeError
    assert not errors.MessageTooLargeError.retriable
    codes = errors.all_codes()
    assert len({c.__name__ for c in codes.values()}) == len(codes)


def test_message_names_code_and_detail_and_survives_pickle() -> None:
    err = errors.UnknownTopicOrPartitionError("topic 'x' partition 3")
    assert str(err) == "[Error 3] UNKNOWN_TOPIC_OR_PARTITION: topic 'x' partition 3"
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is errors.UnknownTopicOrPartitionError
    assert str(again) == str(err)


def test_unknown_code_gets_a_usable_class() -> None:
    cls = errors.for_code(9999)
    assert issubclass(cls, errors.BrokerResponseError)
    assert cls.code == 9999
    assert errors.error_name(0) == "NONE"
    with pytest.raises(errors.BrokerResponseError, match="9999"):
        raise cls("boom")


def test_caller_mistakes_are_also_value_errors() -> None:
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.KafkaTimeoutError, TimeoutError)
