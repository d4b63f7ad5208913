import pytest

from kclient.cli.line_reader import LineReader, LineReaderConfig, MalformedLineError
from kclient.errors import ConfigError


def reader(**props: str) -> LineReader:
    return LineReader(LineReaderConfig.from_properties(props))


def test_plain_lines_are_values_with_no_key() -> None:
    parsed = reader().parse("hello\tworld")
    assert parsed.key is None
    assert parsed.value == b"hello\tworld"
    assert parsed.headers == []


def test_key_and_headers_in_kafka_line_format() -> None:
    r = reader(**{"parse.key": "true", "parse.headers": "true"})
    parsed = r.parse("h1:v1,h2:v2\tk\tvalue with\ttab")
    assert parsed.headers == [("h1", b"v1"), ("h2", b"v2")]
    assert parsed.key == b"k"
    assert parsed.value == b"value with\ttab"


def test_custom_separators_and_utf8() -> None:
    r = reader(**{"parse.key": "true", "key.separator": "::"})
    parsed = r.parse("clé::välue")
    assert parsed.key == "clé".encode()
    assert parsed.value == "välue".encode()


def test_null_marker_makes_key_value_and_header_values_null() -> None:
    r = reader(**{"parse.key": "true", "parse.headers": "true", "null.marker": "NULL"})
    parsed = r.parse("a:NULL,b\tNULL\tNULL")
    assert parsed.key is None
    assert parsed.value is None
    assert parsed.headers == [("a", None), ("b", None)]
    with pytest.raises(MalformedLineError, match="null.marker"):
        r.parse("NULL:x\tk\tv")


def test_missing_key_separator_names_the_line_number() -> None:
    r = reader(**{"parse.key": "true"})
    r.parse("k\tv")
    with pytest.raises(MalformedLineError, match="line 2: no key separator") as info:
        r.parse("no separator here")
    assert info.value.line_number == 2
    # both ways out are spelled as the option to type
    assert "--property parse.key=false, or --property ignore.error=true" in str(info.value)


def test_bad_reader_properties_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="parse.key"):
        reader(**{"parse.key": "yes"})
    with pytest.raises(ConfigError, match="unknown reader property 'parse.keys'"):
        reader(**{"parse.keys": "true"})


def test_bytes_that_are_not_utf8_round_trip_through_surrogateescape() -> None:
    raw_key, raw_value = b"\xff\xfe-key", b"v\x80\x81\xc3"
    line = (raw_key + b"\t" + raw_value).decode("utf-8", "surrogateescape")
    parsed = reader(**{"parse.key": "true"}).parse(line)
    assert (parsed.key, parsed.value) == (raw_key, raw_value)


def test_a_header_key_that_is_not_utf8_is_a_malformed_line() -> None:
    line = b"k\xff:v\tvalue".decode("utf-8", "surrogateescape")
    with pytest.raises(MalformedLineError, match="header key .* is not valid UTF-8"):
        reader(**{"parse.headers": "true"}).parse(line)
