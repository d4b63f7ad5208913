"""Turns text lines into records, as kafka-console-producer's LineMessageReader does.

Line format with every option on: ``h1:v1,h2:v2<TAB>key<TAB>value``. Reader properties
(``--property k=v``) use Kafka's names: ``parse.key``, ``key.separator``,
``parse.headers``, ``headers.delimiter``, ``headers.separator``,
``headers.key.separator``, ``null.marker``, ``ignore.error``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kclient.errors import ConfigError, KafkaError

_BOOL_TEXT = {"true": True, "false": False}


class MalformedLineError(KafkaError, ValueError):
    """A line does not have the shape the reader properties ask for."""

    def __init__(self, line_number: int, message: str) -> None:
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number


@dataclass(frozen=True)
class ParsedLine:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class LineReaderConfig:
    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReaderConfig:
        """Build from ``--property`` pairs; unknown names and bad booleans are ConfigErrors."""
        names = {
            "parse.key": "parse_key",
            "key.separator": "key_separator",
            "parse.headers": "parse_headers",
            "headers.delimiter": "headers_delimiter",
            "headers.separator": "headers_separator",
            "headers.key.separator": "headers_key_separator",
            "null.marker": "null_marker",
            "ignore.error": "ignore_error",
        }
        values: dict[str, object] = {}
        for name, raw in props.items():
            attr = names.get(name)
            if attr is None:
                known = ", ".join(sorted(names))
                raise ConfigError(f"unknown reader property {name!r}; known: {known}")
            if attr in ("parse_key", "parse_headers", "ignore_error"):
                flag = _BOOL_TEXT.get(raw.strip().lower())
                if flag is None:
                    raise ConfigError(
                        f"reader property {name!r} must be true or false, got {raw!r}"
                    )
                values[attr] = flag
            else:
                if raw == "" and attr != "null_marker":
                    raise ConfigError(f"reader property {name!r} must not be empty")
                values[attr] = raw
        config = cls(**values)  # type: ignore[arg-type]
        if config.null_marker is not None and config.null_marker == "":
            raise ConfigError("reader property 'null.marker' must not be empty")
        if (
            config.parse_headers
            and config.parse_key
            and config.headers_delimiter == config.key_separator
            and config.headers_separator == config.key_separator
        ):
            raise ConfigError(
                "'headers.separator' must differ from 'key.separator' when both are parsed"
            )
        return config


class LineReader:
    """Parses one line at a time; keeps the line number for error messages."""

    def __init__(self, config: LineReaderConfig) -> None:
        self.config = config
        self.line_number = 0

    def parse(self, line: str) -> ParsedLine:
        """Parse a line (without its newline). Raises MalformedLineError."""
        self.line_number += 1
        cfg = self.config
        rest = line
        headers: list[tuple[str, bytes | None]] = []
        if cfg.parse_headers:
            cut = rest.find(cfg.headers_delimiter)
            if cut < 0:
                raise MalformedLineError(
                    self.line_number,
                    f"no headers delimiter {cfg.headers_delimiter!r} found in {_clip(line)}",
                )
            headers = self._headers(rest[:cut])
            rest = rest[cut + len(cfg.headers_delimiter) :]
        key: bytes | None = None
        if cfg.parse_key:
            cut = rest.find(cfg.key_separator)
            if cut < 0:
                raise MalformedLineError(
                    self.line_number,
                    f"no key separator {cfg.key_separator!r} found in {_clip(line)} "
                    "(set --property parse.key=false, or --property ignore.error=true to skip such "
                    "lines)",
                )
            key = self._nullable(rest[:cut])
            rest = rest[cut + len(cfg.key_separator) :]
        return ParsedLine(key=key, value=self._nullable(rest), headers=headers)

    def _nullable(self, text: str) -> bytes | None:
        if self.config.null_marker is not None and text == self.config.null_marker:
            return None
        # the input is read with surrogateescape: bytes that are not UTF-8 go out as read
        return text.encode("utf-8", "surrogateescape")

    def _headers(self, text: str) -> list[tuple[str, bytes | None]]:
        cfg = self.config
        if text == "":
            return []
        out: list[tuple[str, bytes | None]] = []
        for item in text.split(cfg.headers_separator):
            name, sep, value = item.partition(cfg.headers_key_separator)
            if cfg.null_marker is not None and name == cfg.null_marker:
                raise MalformedLineError(
                    self.line_number, f"header key equals null.marker {cfg.null_marker!r}"
                )
            if not name.isascii() and _not_utf8(name):
                raise MalformedLineError(
                    self.line_number,
                    f"header key {_clip(name)} is not valid UTF-8 (Kafka header keys are "
                    "strings; values may be any bytes)",
                )
            out.append((name, self._nullable(value) if sep else None))
        return out


def _not_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _clip(line: str, limit: int = 80) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")
