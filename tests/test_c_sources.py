"""The hand-written C keeps to its own data (issue 29): it names no private (``_x``)
attribute of a Python class. A name with one leading underscore may appear in a C string
only where the C defines it itself: a member of its own type's method or attribute table
(``{"_start", ...}``: ``RecordsWriter``'s hooks for the Python builder, the asyncio
protocol of kclient.aio's future) or a module attribute it adds (the ``_C_API`` capsule
other extensions import). Anything else would be C reading another class's private state,
which only a test that happens to run that path would notice when it is renamed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: "_name" in C, not a dunder, not the file of an #include
PRIVATE_LITERAL = re.compile(r'"(_[A-Za-z0-9][A-Za-z0-9_]*)"')
#: where C defines a name: a method/getset/member table entry, or a module attribute
DEFINED = re.compile(r'\{\s*"(_[A-Za-z0-9]\w*)"\s*,|PyModule_Add\w*\([^,]+,\s*"(_[A-Za-z0-9]\w*)"')


def c_sources() -> dict[str, str]:
    """The hand-written C files the repository holds (generated ones are not tracked)."""
    listed = subprocess.run(
        ["git", "ls-files", "kclient/*.c", "kclient/*.h"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    if not listed:  # not a git checkout (an unpacked sdist): every C file of the package
        listed = [str(p.relative_to(ROOT)) for p in (ROOT / "kclient").rglob("*.[ch]")]
    return {name: (ROOT / name).read_text() for name in listed}


def private_names(text: str) -> set[str]:
    lines = (line for line in text.splitlines() if not line.lstrip().startswith("#include"))
    return set(PRIVATE_LITERAL.findall("\n".join(lines)))


def defined_names(text: str) -> set[str]:
    return {a or b for a, b in DEFINED.findall(text)}


def test_the_c_names_no_private_attribute_it_does_not_define() -> None:
    sources = c_sources()
    assert len(sources) >= 10, sorted(sources)
    defined = set().union(*(defined_names(text) for text in sources.values()))
    foreign = {
        name: sorted(private_names(text) - defined)
        for name, text in sources.items()
        if private_names(text) - defined
    }
    assert not foreign, f"C names private attributes it does not define: {foreign}"


def test_the_check_finds_a_private_attribute_read() -> None:
    reads = 'PyObject *x = PyObject_GetAttrString(batch, "_records");\n'
    own = '{"_start", (PyCFunction)start, METH_O, NULL},\nPyModule_AddObjectRef(m, "_C_API", c);'
    assert private_names(reads) - defined_names(own) == {"_records"}
    assert private_names(own) == defined_names(own) == {"_start", "_C_API"}
    assert private_names('#include "_capi.h"\n') == set()
