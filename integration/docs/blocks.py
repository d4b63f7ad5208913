"""The code blocks of the README and the documentation, as the code-block test runs them.

Conventions for writers (also in docs/design.md, "Documentation"):

- Python blocks (```python) and shell blocks (```bash, ```console, ```sh) run as written,
  in the order of their document, against one broker per document. They address it as
  ``127.0.0.1:9092`` (or ``localhost:9092``), which the test replaces with the address of
  the broker it started.
- ``<!-- fragment -->`` on the line before a block: a deliberate fragment (needs a real
  cluster, a Spark cluster, names from around it); it is compiled (``bash -n`` for shell)
  but not run.
- ``<!-- server -->`` before a shell block: the command that starts the document's broker
  (``kclient-broker ...``); the test starts it in the background and waits for its
  ``bootstrap.servers=`` line. Without one the test starts ``kclient-broker`` itself.
- Blocks of any other language (```text, output samples, MyST directives) are not code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = frozenset({"python", "py", "python3"})
SHELL = frozenset({"bash", "console", "sh", "shell"})
MARKERS = frozenset({"fragment", "server"})
PLACEHOLDERS = ("127.0.0.1:9092", "localhost:9092")

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<lang>[^`\s]*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<name>[a-z-]+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    document: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    language: str  # "python" or "shell"
    code: str
    marker: str | None  # "fragment", "server" or None

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"


class MarkerError(ValueError):
    """A marker the code-block test does not know, or one not followed by a code block."""


def documents() -> list[Path]:
    docs = sorted(
        p for p in (ROOT / "docs").rglob("*") if p.suffix == ".md" and "_build" not in p.parts
    )
    return [ROOT / "README.md", *docs]


def blocks_of(path: Path) -> list[Block]:
    """The Python and shell blocks of one Markdown document, with their markers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    relative = str(path.relative_to(ROOT))
    out: list[Block] = []
    marker: str | None = None
    marker_line = 0
    i = 0
    while i < len(lines):
        m = _MARKER.match(lines[i])
        if m and m.group("name") in MARKERS:
            marker, marker_line = m.group("name"), i + 1
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if fence is None:
            if marker is not None and lines[i].strip():
                raise MarkerError(
                    f"{relative}:{marker_line}: <!-- {marker} --> is not followed by a code block"
                )
            i += 1
            continue
        start = i
        indent = len(fence.group("indent"))
        close = re.compile(rf"^ {{0,{indent + 3}}}{fence.group('fence')}`*\s*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        lang = fence.group("lang").lower()
        kind = "python" if lang in PYTHON else "shell" if lang in SHELL else None
        if kind is not None:
            out.append(Block(relative, start + 1, kind, "\n".join(body) + "\n", marker))
        elif marker is not None:
            raise MarkerError(
                f"{relative}:{marker_line}: <!-- {marker} --> before a ```{lang} block"
            )
        marker = None
    return out


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks_of(path)]


def with_address(code: str, bootstrap_servers: str) -> str:
    for placeholder in PLACEHOLDERS:
        code = code.replace(placeholder, bootstrap_servers)
    return code
