"""A TLS file setting that points at a directory says so (it said "no such file")."""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient import KafkaProducer
from kclient.errors import ConfigError


def test_a_directory_for_the_ca_file_is_named_a_directory(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"'ssl\.truststore\.location' is .*: a directory; give a PEM file"
    ):
        KafkaProducer(
            bootstrap_servers="127.0.0.1:9093", security_protocol="SSL", ssl_cafile=str(tmp_path)
        )
