"""How kclient-console-consumer prints a record: Kafka's print.* properties, bytes as read."""

from __future__ import annotations

import pytest

from kclient.cli.console_consumer import Formatter, build_parser, main
from kclient.errors import ConfigError
from kclient.record import Record


def record(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
) -> Record:
    return Record(offset=7, timestamp=1700000000000, key=key, value=value, headers=headers)


def test_the_value_alone_by_default_byte_for_byte() -> None:
    assert Formatter().line(0, record(b"k", b"\xff\x00v", [])) == b"\xff\x00v\n"


def test_every_field_in_kafkas_order_with_its_separators() -> None:
    formatter = Formatter.from_properties(
        {
            "print.timestamp": "true",
            "print.partition": "true",
            "print.offset": "true",
            "print.headers": "true",
            "print.key": "true",
            "key.separator": " | ",
            "headers.separator": ";",
        }
    )
    line = formatter.line(2, record(None, b"v", [("a", b"1"), ("b", None)]))
    assert line == b"CreateTime:1700000000000 | Partition:2 | Offset:7 | a:1;b:null | null | v\n"
    assert formatter.line(2, record(b"k", None, [])).endswith(b" | NO_HEADERS | k | null\n")


def test_escapes_in_separators_and_a_null_literal() -> None:
    formatter = Formatter.from_properties(
        {"print.key": "true", "key.separator": "\\t=\\t", "null.literal": "<none>"}
    )
    assert formatter.line(0, record(None, b"v", [])) == b"<none>\t=\tv\n"


def test_unknown_or_malformed_properties_name_what_to_fix() -> None:
    with pytest.raises(ConfigError, match="unknown --property 'print.keys'; known: "):
        Formatter.from_properties({"print.keys": "true"})
    with pytest.raises(ConfigError, match="--property print.key must be true or false"):
        Formatter.from_properties({"print.key": "yes"})


def test_command_line_mistakes_exit_2_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    # the address is never dialled: each mistake is caught first
    base = ["--bootstrap-server", "127.0.0.1:9", "--topic", "t"]
    assert main([*base, "--offset", "3"]) == 2
    assert "--offset needs --partition" in capsys.readouterr().err
    assert main([*base, "--max-messages", "0"]) == 2
    assert "--max-messages must be above 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--from-beginning", "--offset", "1"])
