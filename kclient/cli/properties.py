"""Java ``.properties`` files and ``k=v`` arguments, as Kafka's command-line tools read them."""

from __future__ import annotations

from pathlib import Path

from kclient.errors import ConfigError


def parse_pair(text: str, option: str) -> tuple[str, str]:
    """``'k=v'`` → ``('k', 'v')``; anything else is a ConfigError naming the option."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{option} expects key=value, got {text!r}")
    return key.strip(), value.strip()


def parse_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, value = parse_pair(item, option)
        out[key] = value
    return out


def load_properties(path: str) -> dict[str, str]:
    """Read a properties file: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {path!r}: {exc.strerror}") from exc
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cuts = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not cuts:
            raise ConfigError(f"{path}:{number}: expected key=value, got {raw!r}")
        cut = min(cuts)
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out
