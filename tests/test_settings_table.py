"""The documented table of producer settings is the settings table in ``kclient.settings``."""

from __future__ import annotations

from pathlib import Path

from kclient.config import ProducerConfig
from kclient.settings import SETTINGS, settings_markdown

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference" / "configuration.md"


def test_the_configuration_reference_is_made_from_the_settings_table() -> None:
    # docs/_ext/kclient_docs.py renders settings_markdown() where the page says so; a table
    # copied by hand would go stale
    text = REFERENCE.read_text()
    assert "```{kclient-settings}" in text
    assert not [line for line in text.splitlines() if line.startswith("| `")]
    rows = settings_markdown().splitlines()[2:]
    assert len(rows) == len(SETTINGS)


def test_every_setting_is_documented_and_accepted_under_both_spellings() -> None:
    for s in SETTINGS:
        assert s.doc, f"{s.name} has no words for the README"
    config = ProducerConfig({"bootstrap.servers": "x:1", "linger_ms": 7, "batch.size": 99})
    assert (config.linger_ms, config.batch_size) == (7, 99)
    assert set(config.to_dict()) == {s.name for s in SETTINGS}


def test_the_console_producer_flags_set_real_settings() -> None:
    from kclient.cli import console_producer
    from kclient.settings import BY_NAME, COMPRESSION_TYPES

    for _, setting, _ in console_producer._FLAG_SETTINGS:
        assert setting in BY_NAME
    assert console_producer.CODECS == COMPRESSION_TYPES
