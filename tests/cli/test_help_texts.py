"""Every command's --help is plain words: no reST or Markdown markup from docstrings."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest

from kclient.broker.__main__ import main as broker_main
from kclient.cli import console_consumer, console_producer, demo, main, producer_perf, topics

MARKUP = re.compile(r"``|:(class|func|meth|mod|attr):`|\*\*")
COMMANDS: list[tuple[str, Callable[[Sequence[str]], object], list[str]]] = [
    ("kclient", main.main, []),
    ("kclient demo", demo.main, []),
    ("kclient topics", topics.main, []),
    ("kclient topics create", topics.main, ["create"]),
    ("kclient topics describe", topics.main, ["describe"]),
    ("kclient-broker", broker_main, []),
    ("kclient-console-producer", console_producer.main, []),
    ("kclient-console-consumer", console_consumer.main, []),
    ("kclient-producer-perf", producer_perf.main, []),
]


@pytest.mark.parametrize(("name", "entry", "args"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_help_is_plain_words(
    name: str,
    entry: Callable[[Sequence[str]], object],
    args: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        entry([*args, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage:"), text[:200]
    assert not MARKUP.search(text), f"{name} --help shows markup: {MARKUP.search(text)}"
