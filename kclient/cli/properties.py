"""Java ``.properties`` files and ``k=v`` arguments, as Kafka's command-line tools read them.

``load_properties`` follows ``java.util.Properties.load``: ``key=value``, ``key: value``
or ``key value``; ``#`` and ``!`` comment lines; a line ending in an odd number of
backslashes continues on the next (whose leading blanks are skipped), so a
``sasl.jaas.config`` may span lines; escapes ``\\t \\n \\r \\f \\uXXXX``, and a backslash
before any other character stands for that character. A key alone has the value ``""``.

Values may be secrets (``sasl.password``, ``sasl.jaas.config``): no error here ever quotes
a line or an argument; errors name the file and line, or the option and its position.
"""

from __future__ import annotations

from pathlib import Path

from kclient.errors import ConfigError

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_pair(text: str, option: str, position: int = 0) -> tuple[str, str]:
    """``'k=v'`` → ``('k', 'v')``; anything else is a ConfigError naming the option (and
    which of its arguments, counting from 1, when ``position`` is given)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        which = f" (its argument number {position})" if position else ""
        raise ConfigError(
            f"{option} expects key=value{which}, got an argument "
            f"{'with no key' if sep else 'without ='}; it is not shown, as it may hold a secret"
        )
    return key.strip(), value.strip()


def parse_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for position, item in enumerate(items or [], start=1):
        key, value = parse_pair(item, option, position)
        out[key] = value
    return out


def load_properties(path: str) -> dict[str, str]:
    """Read a Java properties file (see the module docstring)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {path!r}: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise ConfigError(f"properties file {path!r} is not UTF-8 text") from None
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        try:
            out[_unescape(key)] = _unescape(value)
        except ValueError as exc:
            raise ConfigError(f"{path}:{number}: {exc} (the line is not shown)") from None
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(number of the first natural line, logical line without comments and blanks)."""
    lines: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(_BLANKS)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending.append(line[:-1])
            continue
        pending.append(line)
        lines.append((start, "".join(pending)))
        pending = []
    if pending:
        lines.append((start, "".join(pending)))
    return lines


def _split(line: str) -> tuple[str, str]:
    """Key and value: the key ends at the first unescaped ``=``, ``:`` or blank."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:" or char in _BLANKS:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        following = text[i + 1 : i + 2]
        if following == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError("malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(following, following))
        i += 2
    return "".join(out)
