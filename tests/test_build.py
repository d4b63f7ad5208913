"""The build under test is the one CI says it is: accelerated, or pure Python.

The C extensions are ``optional`` in ``setup.py`` (an install without a compiler still
works), and each C test skips when its extension is not there. So a failed compile would
leave a green suite with the speed gone. These tests close that hole: every extension
``setup.py`` declares and every module ``kclient/_compiled.py`` lists for mypyc must have
been built (CI builds them all, for both runs); in the accelerated run each compiled module
is the compiled one and every switch-over point chose the C, and with
``KCLIENT_PURE_PYTHON`` set every compiled module runs from its ``.py`` source and no
switch-over point took the C.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from kclient._compiled import MODULES, SWITCHES, module_names
from kclient.record._accel import PURE_PYTHON_ENV

ROOT = Path(__file__).resolve().parent.parent
PURE = os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("", "0")


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
    assert {"kclient.record._speedups", "kclient.sender._speedups"} <= set(names)
    assert len(names) == len(set(names)) >= 5


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


def test_every_compiled_module_is_a_python_module_of_the_package() -> None:
    assert MODULES, "kclient/_compiled.py lists no module"
    for path in MODULES:
        assert (ROOT / path).is_file(), f"{path} in kclient/_compiled.py does not exist"


@pytest.mark.parametrize("name", module_names())
def test_every_compiled_module_was_built(name: str) -> None:
    """The compiled extension sits next to its source (``pip install -e`` or
    ``setup.py build_ext --inplace`` put it there): a failed mypyc build fails here."""
    package, _, leaf = name.rpartition(".")
    folder = Path(importlib.import_module(package).__file__ or "").parent
    built = [folder / (leaf + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    assert any(path.is_file() for path in built), (
        f"{name} was not compiled (rebuild: pip install -e . or python setup.py build_ext "
        "--inplace)"
    )


@pytest.mark.parametrize("name", module_names())
def test_each_compiled_module_runs_the_build_under_test(name: str) -> None:
    module = sys.modules.get(name) or importlib.import_module(name)
    origin = module.__file__ or ""
    if PURE:
        assert origin.endswith(".py"), f"{name} is {origin} under {PURE_PYTHON_ENV}"
    else:
        assert not origin.endswith(".py"), f"{name} runs its source ({origin}), not compiled"


def test_the_compiled_modules_were_built_from_these_sources() -> None:
    from kclient._compiled import stale_modules

    assert stale_modules() == []


def test_a_compiled_module_edited_without_a_rebuild_runs_the_pure_python_build() -> None:
    """A checkout edited (or updated) after the last build: the compiled code would not be
    the code in the files, so kclient says so and runs every compiled module from source
    (not some: they call each other's classes directly)."""
    import subprocess

    script = """
import sys, types, warnings
built = types.ModuleType("kclient._compiled_sources")
built.DIGESTS = {"kclient/sender/sender.py": "0" * 64}
sys.modules["kclient._compiled_sources"] = built
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import kclient
    import kclient.network.client, kclient.sender.sender
print(kclient.sender.sender.__file__)
print(kclient.network.client.__file__)
print(*[str(w.message) for w in caught if w.category is RuntimeWarning], sep="\\n")
"""
    env = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    sender, client, warning = out.stdout.splitlines()[:3]
    assert sender.endswith("sender.py") and client.endswith("client.py")
    assert "kclient/sender/sender.py and" in warning and "pip install -e ." in warning
