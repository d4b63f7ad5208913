"""The code-block test finds what a writer means: languages, markers, indented fences."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.docs import blocks
from integration.docs.blocks import MarkerError, blocks_of, with_address


def parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> list[blocks.Block]:
    monkeypatch.setattr(blocks, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(text)
    return blocks_of(page)


def test_languages_markers_and_indented_fences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = parse(
        tmp_path,
        monkeypatch,
        "intro\n\n<!-- server -->\n```bash\nkclient-broker\n```\n\n```text\noutput\n```\n\n"
        "* a list item:\n\n  <!-- fragment -->\n  ```python\n  x = 1\n  ```\n\n"
        "````python\nprint('```')\n````\n",
    )
    assert [(b.language, b.marker, b.code, b.line) for b in found] == [
        ("shell", "server", "kclient-broker\n", 4),
        ("python", "fragment", "x = 1\n", 15),
        ("python", None, "print('```')\n", 19),
    ]


def test_a_marker_must_come_right_before_a_code_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(MarkerError, match=r"page.md:1: <!-- fragment --> is not followed"):
        parse(tmp_path, monkeypatch, "<!-- fragment -->\nsome words\n```python\nx = 1\n```\n")
    with pytest.raises(MarkerError, match=r"before a ```text block"):
        parse(tmp_path, monkeypatch, "<!-- fragment -->\n```text\nx\n```\n")


def test_the_placeholder_address_is_replaced() -> None:
    code = 'KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}); "localhost:9092"'
    assert with_address(code, "127.0.0.1:5555").count("127.0.0.1:5555") == 2
