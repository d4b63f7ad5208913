"""Sphinx configuration of kclient's documentation (built by ./scripts/docs)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import kclient  # noqa: E402

project = "kclient"
author = "the kclient authors"
copyright = "2026, the kclient authors"  # noqa: A001
version = release = kclient.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "kclient_docs",
]
source_suffix = {".md": "markdown"}  # every page is Markdown (MyST)
root_doc = "index"
exclude_patterns = ["_build", "**/_build"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # the standard library's docstrings are not reST
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Names in signatures that live outside kclient (no intersphinx: the build is offline).
nitpick_ignore_regex = [
    ("py:.*", r"(typing|collections|concurrent|asyncio|_asyncio|ssl|socket|threading|_thread|enum|types|os|uuid)\b.*"),
    ("py:.*", r"(pyspark|pyarrow|pandas|pytest|_pytest|confluent_kafka)\b.*"),
    ("py:.*", r"(opentelemetry\b.*|trace\.TracerProvider|TextMapPropagator)"),
    ("py:.*", r"(Any|Callable|Iterable|Iterator|Sequence|Mapping|Awaitable|Buffer|Self)"),
    ("py:.*", r"(NoneType|Ellipsis|EllipsisType|T|_T|P|CancelledError|Future)"),
]

html_theme = "alabaster"
html_title = f"kclient {release}"
html_theme_options = {"description": "A Kafka producer for Python, with an embedded broker"}
