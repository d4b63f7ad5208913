"""The README's table of producer settings is the settings table in ``kclient.settings``."""

from __future__ import annotations

from pathlib import Path

from kclient.config import ProducerConfig
from kclient.settings import SETTINGS, settings_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_table() -> str:
    text = README.read_text()
    section = text.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    return "".join(line + "\n" for line in section.splitlines() if line.startswith("|"))


def test_the_readme_settings_table_is_made_from_the_settings_table() -> None:
    # after a change to kclient/settings.py, paste settings_markdown() into the README
    assert readme_table() == settings_markdown()


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
