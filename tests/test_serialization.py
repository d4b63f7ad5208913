import pytest

from kclient import serialization
from kclient.errors import SerializationError
from kclient.serialization import IntegerSerializer, JsonSerializer, StringSerializer


def test_bytes_pass_through_is_the_default() -> None:
    assert serialization.resolve(None, "value.serializer") is None
    assert serialization.to_bytes("value", b"abc") == b"abc"
    assert serialization.to_bytes("value", bytearray(b"ab")) == b"ab"
    assert serialization.to_bytes("value", None) is None


def test_non_bytes_without_serializer_says_what_to_set() -> None:
    with pytest.raises(
        SerializationError, match="value must be bytes or None, got str; set 'value.serializer'"
    ):
        serialization.to_bytes("value", "text")


def test_named_serializers() -> None:
    as_str = serialization.resolve("str", "key.serializer")
    as_json = serialization.resolve("json", "value.serializer")
    as_int = serialization.resolve("int", "key.serializer")
    as_long = serialization.resolve("long", "key.serializer")
    assert as_str is not None and as_json is not None and as_int is not None and as_long is not None
    assert as_str("t", "héllo") == "héllo".encode()
    assert as_json("t", {"a": [1, 2]}) == b'{"a":[1,2]}'
    assert as_int("t", -2) == b"\xff\xff\xff\xfe"
    assert as_long("t", 1) == b"\x00" * 7 + b"\x01"
    assert as_json("t", None) is None


def test_callables_and_java_style_objects() -> None:
    class Upper:
        def serialize(self, topic: str, data: str) -> bytes:
            return f"{topic}:{data.upper()}".encode()

    fn = serialization.resolve(lambda v: v.encode(), "value.serializer")
    obj = serialization.resolve(Upper(), "value.serializer")
    assert fn is not None and obj is not None
    assert fn("t", "x") == b"x"
    assert obj("orders", "x") == b"orders:X"


def test_apply_reports_failures_and_wrong_results() -> None:
    with pytest.raises(SerializationError, match="value.serializer failed for topic 't'"):
        serialization.apply(lambda t, v: 1 / 0, "value", "t", 1)
    with pytest.raises(SerializationError, match="returned int .* it must return bytes"):
        serialization.apply(lambda t, v: 5, "value", "t", 1)


def test_serializer_argument_checks() -> None:
    with pytest.raises(SerializationError, match="StringSerializer expects str"):
        StringSerializer()(b"x")  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match="does not fit in a signed 32-bit"):
        IntegerSerializer()(2**31)
    with pytest.raises(SerializationError, match="unknown serializer 'avro'"):
        serialization.resolve("avro", "value.serializer")
    assert JsonSerializer(sort_keys=True)({"b": 1, "a": 2}) == b'{"a":2,"b":1}'
