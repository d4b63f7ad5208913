"""The hot-path modules that the accelerated build compiles with mypyc.

``setup.py`` hands ``MODULES`` to ``mypycify``: each becomes a C extension built from the
very ``.py`` file next to it, so the Python is the one implementation and ``mypy --strict``
checks the program that runs. With ``KCLIENT_PURE_PYTHON`` set (to anything but ``0``) the
finder in ``kclient/__init__.py`` loads these modules from their ``.py`` source instead,
so the pure-Python build really runs Python. Constants only: any thread.

A class in these modules is a native (mypyc) class: its attributes are the ones its
``__init__`` assigns and its methods cannot be replaced on the class or the instance. A
class that Python code outside this list subclasses, or that tests give attributes,
says so with ``@mypyc_attr(allow_interpreted_subclasses=True)`` or
``@mypyc_attr(native_class=False)``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

PURE_PYTHON_ENV = "KCLIENT_PURE_PYTHON"
"""Set to a non-empty value other than ``0``: run the Python source of every module,
compiled or hand-written C alike."""


def pure_python() -> bool:
    """Whether ``KCLIENT_PURE_PYTHON`` asks for the pure-Python build (read at import)."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("", "0")


MODULES = [
    # the Sender's step and its answers (Java's Sender, completeBatch)
    "kclient/sender/sender.py",
    "kclient/sender/produce_request.py",
    "kclient/sender/produce_responses.py",
    "kclient/sender/drain.py",
    "kclient/sender/metrics.py",
    "kclient/sender/buffer_pool.py",
    "kclient/sender/incomplete.py",
    # the network client (Java's NetworkClient, Selector, KafkaChannel, InFlightRequests)
    "kclient/network/client.py",
    "kclient/network/client_nodes.py",
    "kclient/network/client_connections.py",
    "kclient/network/client_unanswered.py",
    "kclient/network/client_writes.py",
    "kclient/network/selector.py",
    "kclient/network/selector_connect.py",
    "kclient/network/channel.py",
    "kclient/network/in_flight.py",
    "kclient/network/idle_expiry.py",
    "kclient/network/kafka_client.py",
    "kclient/network/connection_states.py",
    "kclient/network/cluster.py",
    "kclient/network/metadata_updater.py",
    "kclient/network/api_versions.py",
    # kclient.aio: its futures' batch groups, the Sender's driver and the selector on the event loop
    "kclient/aio/completions.py",
    "kclient/aio/loop_sender.py",
    "kclient/aio/loop_selector.py",
]
"""Paths relative to the project root, as ``mypycify`` takes them."""

SWITCHES = [
    ("kclient.record._accel", "ACCELERATED"),
    ("kclient.protocol.produce_fast", "C_ACCELERATED"),
    ("kclient.aio.completions", "NATIVE"),
]
"""(module, flag): each switch-over point to hand-written C, and the flag that records
whether it took the C (``tests/test_build.py`` and the wheel's smoke test read them)."""


def module_names() -> list[str]:
    """``MODULES`` as dotted module names (``kclient.sender.sender``)."""
    return [path.removesuffix(".py").replace("/", ".") for path in MODULES]


class SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of ``MODULES`` as their ``.py`` source, ahead of the compiled
    extension that the ordinary path finder would pick (extensions come first there)."""

    def __init__(self, root: str, names: Sequence[str]) -> None:
        self._paths = {name: os.path.join(root, *name.split(".")) + ".py" for name in names}

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        source = self._paths.get(fullname)
        if source is None or not os.path.exists(source):
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def install_source_finder() -> None:
    """Makes ``MODULES`` load from source (the pure-Python build); once per process."""
    if any(isinstance(finder, SourceFinder) for finder in sys.meta_path):
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.meta_path.insert(0, SourceFinder(root, module_names()))


def stale_modules(root: str | None = None) -> list[str]:
    """The ``MODULES`` whose source differs from what was compiled (``setup.py`` records
    each one's SHA-256 in the generated ``kclient/_compiled_sources.py``): a checkout
    edited or updated without a rebuild. Empty when nothing was built by ``setup.py`` or a
    source is not there to compare (an installation without the ``.py`` files)."""
    try:
        built: dict[str, str] = importlib.import_module("kclient._compiled_sources").DIGESTS
    except ImportError:
        return []
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stale = []
    for path in MODULES:
        try:
            with open(os.path.join(root, path), "rb") as source:
                digest = hashlib.sha256(source.read()).hexdigest()
        except OSError:
            continue
        if built.get(path) != digest:
            stale.append(path)
    return stale


# imported first by kclient/__init__.py, before any compiled module (setup.py loads this
# file under another name, for MODULES alone)
if __name__ != "kclient._compiled":
    pass
elif pure_python():
    install_source_finder()
elif _stale := stale_modules():
    # The compiled modules call each other's classes directly: all of them run from
    # source, or none.
    warnings.warn(
        f"kclient: {_stale[0]}"
        + (
            f" and {len(_stale) - 1} more compiled modules changed since they were"
            if len(_stale) > 1
            else " changed since it was"
        )
        + " compiled; running the pure-Python build. Rebuild: pip install -e . (or python "
        "setup.py build_ext --inplace)",
        RuntimeWarning,
        stacklevel=2,
    )
    install_source_finder()
