"""Sphinx extension for kclient's docs: the configuration reference, made from the code.

``kclient-settings`` renders the producer's settings table (``kclient.settings``), the one
place every setting is declared, so the reference can never drift from what
``ProducerConfig`` accepts.
"""

from __future__ import annotations

from typing import Any

import sys

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

#: Where the API reference documents public names, in the order a short name is looked up.
PUBLIC_MODULES = (
    "kclient",
    "kclient.errors",
    "kclient.aio",
    "kclient.spark",
    "kclient.broker",
    "kclient.testing",
)


class SettingsTable(SphinxDirective):
    """The table of every producer setting: name, default, Java's default, meaning."""

    has_content = False
    source = "kclient/settings.py"

    def markdown(self) -> str:
        from kclient.settings import settings_markdown

        return settings_markdown()

    def run(self) -> list[nodes.Node]:
        container = nodes.container()
        lines = self.markdown().splitlines()
        self.state.nested_parse(StringList(lines, source=self.source), 0, container)
        return list(container.children)


class LibrdkafkaTable(SettingsTable):
    """librdkafka's producer setting names: the kclient setting each maps to, or why not."""

    source = "kclient/librdkafka.py"

    def markdown(self) -> str:
        from kclient.librdkafka import markdown

        return markdown()


def _internal_name(short: str) -> bool:
    """Whether a kclient module has a name like this (an internal type or alias in a hint)."""
    return any(
        getattr(module, short, None) is not None
        for name, module in list(sys.modules.items())
        if name == "kclient" or name.startswith("kclient.")
    )


def resolve_to_public_name(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Node | None:
    """Type hints name a class where it is defined (``kclient.sender.future.RecordMetadata``);
    link them to where the reference documents it (``kclient.RecordMetadata``). kclient's
    internal types (base classes, protocols) are shown as plain text."""
    if node.get("refdomain") != "py":
        return None
    target = str(node["reftarget"])
    short = target.rsplit(".", 1)[-1]
    objects = env.get_domain("py").objects  # type: ignore[attr-defined]
    for module in PUBLIC_MODULES:
        entry = objects.get(f"{module}.{short}")
        if entry is not None:
            return make_refnode(
                app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, target
            )
    if target.startswith("kclient.") or _internal_name(short):
        return contnode
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("kclient-settings", SettingsTable)
    app.add_directive("kclient-librdkafka-names", LibrdkafkaTable)
    app.connect("missing-reference", resolve_to_public_name)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
