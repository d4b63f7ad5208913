"""The build under test is the one CI says it is: accelerated, or pure Python.

The C extensions are ``optional`` in ``setup.py`` (an install without a compiler still
works), and each C test skips when its extension is not there. So a failed compile would
leave a green suite with the speed gone. These tests close that hole: every extension
``setup.py`` declares must import (CI builds them all, for both runs), and every switch-over
point must have chosen the C, unless ``KCLIENT_PURE_PYTHON`` is set, when none may have.
"""

from __future__ import annotations

import ast
import importlib
import os
from pathlib import Path

import pytest

from kclient.record._accel import PURE_PYTHON_ENV

ROOT = Path(__file__).resolve().parent.parent
PURE = os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("", "0")

# (module, flag): each switch-over point that records whether it took the C.
SWITCHES = [
    ("kclient.record._accel", "ACCELERATED"),
    ("kclient.sender.metrics", "C_ACCELERATED"),
    ("kclient.sender.produce_responses", "C_ACCELERATED"),
    ("kclient.sender.drain", "C_ACCELERATED"),
    ("kclient.protocol.produce_fast", "C_ACCELERATED"),
    ("kclient.network.channel", "C_ACCELERATED"),
    ("kclient.aio.completions", "NATIVE"),
]


def declared_extensions() -> list[str]:
    """The dotted names of the ``Extension(...)`` entries in ``setup.py``."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    return [
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Extension"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def test_setup_declares_the_extensions() -> None:
    names = declared_extensions()
    assert "kclient.record._speedups" in names
    assert len(names) == len(set(names)) >= 10


@pytest.mark.parametrize("name", declared_extensions())
def test_every_declared_extension_was_built(name: str) -> None:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(
            f"{name} was not built ({exc}); the accelerated run needs every extension "
            f"(rebuild: pip install -e . or python setup.py build_ext --inplace), "
            f"or run the pure-Python build with {PURE_PYTHON_ENV}=1"
        )


@pytest.mark.parametrize(("module", "flag"), SWITCHES)
def test_each_switch_over_point_took_the_build_under_test(module: str, flag: str) -> None:
    chose_c = getattr(importlib.import_module(module), flag)
    assert chose_c is (not PURE), (
        f"{module}.{flag} is {chose_c} while {PURE_PYTHON_ENV} is "
        f"{os.environ.get(PURE_PYTHON_ENV)!r}"
    )
