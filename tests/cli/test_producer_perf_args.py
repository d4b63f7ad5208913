"""kclient-producer-perf's arguments: repeated --producer-props add up, payload files are
bytes (UTF-8 or not), and a missing payload file is a ConfigError naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient.cli.producer_perf import build_parser, load_payloads
from kclient.errors import ConfigError


def test_producer_props_given_twice_add_up() -> None:
    args = build_parser().parse_args(
        ["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
         "--producer-props", "bootstrap.servers=h:1", "--producer-props", "acks=1"]
    )  # fmt: skip
    assert args.producer_props == ["bootstrap.servers=h:1", "acks=1"]


def test_payloads_are_split_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "payloads"
    path.write_bytes(b"\xff\xfeone\ntwo\xc3\n\nthree")
    assert load_payloads(str(path), "\\n") == [b"\xff\xfeone", b"two\xc3", b"three"]


def test_a_missing_payload_file_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--payload-file .* cannot be read: No such file"):
        load_payloads(str(tmp_path / "missing"), "\\n")
