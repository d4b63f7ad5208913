from pathlib import Path

import pytest

from kclient.cli.console_producer import build_parser, producer_settings
from kclient.errors import ConfigError


def settings(*argv: str) -> dict[str, object]:
    return producer_settings(build_parser().parse_args(["--bootstrap-server", "b:1", *argv]))


def test_kafka_tool_defaults_apply_when_nothing_is_given() -> None:
    s = settings("--topic", "t")
    assert s["bootstrap.servers"] == "b:1"
    assert s["linger.ms"] == 1000
    assert s["acks"] == "all"
    assert s["compression.type"] == "none"
    assert s["client.id"] == "console-producer"


def test_flags_beat_producer_properties_which_beat_defaults(tmp_path: Path) -> None:
    config = tmp_path / "p.properties"
    config.write_text("# comment\nlinger.ms=7\nbatch.size: 100\nclient.id=mine\n")
    s = settings(
        "--topic",
        "t",
        "--producer.config",
        str(config),
        "--producer-property",
        "batch.size=200",
        "--timeout",
        "3",
        "--compression-codec",
    )
    assert s["linger.ms"] == 3
    assert s["batch.size"] == "200"
    assert s["client.id"] == "mine"
    assert s["compression.type"] == "gzip"


def test_bad_property_pairs_name_the_option() -> None:
    with pytest.raises(ConfigError, match="--producer-property expects key=value"):
        settings("--topic", "t", "--producer-property", "novalue")
    with pytest.raises(ConfigError, match="cannot read properties file"):
        settings("--topic", "t", "--producer.config", "/nonexistent/x.properties")


def test_unknown_codec_is_rejected_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            ["--bootstrap-server", "b", "--topic", "t", "--compression-codec", "brotli"]
        )
