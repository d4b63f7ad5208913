"""Builds kclient's compiled modules and its C extensions; everything else is in pyproject.toml.

``pip install`` (``-e`` too) compiles the hot-path modules listed in ``kclient/_compiled.py``
with mypyc (the Sender's step, the accumulator's drain, the network client, selector and
channel: the same ``.py`` files the pure-Python build runs), and the hand-written C that owns
its data: ``kclient/record/_speedups.c`` (with ``_column.c``, the Arrow columns
``send_batch`` reads in place, ``_append.c``, ``_send.c``, ``_lock.c``, ``_template.c``,
``_open.c`` and ``_crc32c.c``), ``kclient/record/_validate.c`` (the broker's record checks),
``kclient/sender/_murmur2.c``, ``kclient/aio/_future.c`` (kclient.aio's record future and
its helpers), ``kclient/protocol/_produce.c`` with ``_produce_answer.c`` (the one-partition
ProduceRequest and its answer, see ``produce_fast``) and ``kclient/_clock.c`` (the system
clock's ``monotonic_ms``). Every extension, compiled or hand-written, is ``optional``:
without a C compiler or the Python headers the build prints a warning and kclient runs its
pure-Python code instead (``tests/test_build.py`` fails then, as it does when any one
compiled module or C extension is missing). mypy (which brings mypyc) is a build
requirement in pyproject.toml. After
editing a compiled module or a C file, rebuild in place with
``.venv/bin/python setup.py build_ext --inplace``.
"""

import importlib.util
import os

from mypyc.build import mypycify
from setuptools import Extension, setup

# kclient/_compiled.py alone, without importing the kclient package (and its dependencies)
_spec = importlib.util.spec_from_file_location(
    "_kclient_compiled",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "kclient", "_compiled.py"),
)
assert _spec is not None and _spec.loader is not None
_compiled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compiled)
MODULES: list[str] = _compiled.MODULES

COMPILED = mypycify(MODULES, opt_level="3", group_name="kclient")
for _extension in COMPILED:  # as the C extensions: without a compiler the .py modules run
    _extension.optional = True

setup(
    ext_modules=[
        *COMPILED,
        Extension(
            "kclient.record._speedups",
            [
                "kclient/record/_speedups.c",
                "kclient/record/_column.c",
                "kclient/record/_append.c",
                "kclient/record/_lock.c",
                "kclient/record/_send.c",
                "kclient/record/_template.c",
                "kclient/record/_open.c",
                "kclient/record/_crc32c.c",
            ],
            depends=[
                "kclient/record/_column.h",
                "kclient/record/_writer.h",
                "kclient/record/_lock.h",
                "kclient/record/_append.h",
                "kclient/record/_template.h",
                "kclient/record/_crc32c.h",
                "kclient/_slots.h",
                "kclient/_fallback_method.h",
            ],
            optional=True,
        ),
        Extension(
            "kclient.record._validate",
            ["kclient/record/_validate.c"],
            optional=True,
        ),
        Extension(
            "kclient.sender._murmur2",
            ["kclient/sender/_murmur2.c"],
            depends=["kclient/record/_column.h"],
            optional=True,
        ),
        Extension(
            "kclient.aio._future",
            [
                "kclient/aio/_future.c",
                "kclient/aio/_settle.c",
                "kclient/aio/_future_module.c",
            ],
            depends=["kclient/aio/_future.h"],
            optional=True,
        ),
        Extension(
            "kclient.protocol._produce",
            ["kclient/protocol/_produce.c", "kclient/protocol/_produce_answer.c"],
            depends=["kclient/protocol/_produce.h"],
            optional=True,
        ),
        Extension("kclient._clock", ["kclient/_clock.c"], optional=True),
    ]
)
