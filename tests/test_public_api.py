"""What users import: the public names live in ``kclient`` (and the documented
sub-packages), not in the internal modules that define them."""

from __future__ import annotations

import collections.abc
import inspect
import re
import typing
from pathlib import Path

import kclient

README = Path(__file__).resolve().parent.parent / "README.md"
#: packages the README may tell users to import from
PUBLIC_MODULES = {
    "kclient",
    "kclient.aio",
    "kclient.broker",
    "kclient.spark",
    "kclient.protocol",
    "kclient.errors",
    "kclient.oauth",
}


def test_the_types_of_send_and_partitions_for_are_importable_from_kclient() -> None:
    hints = typing.get_type_hints(kclient.KafkaProducer.send)
    for name in ("Header", "Callback", "TopicPartition", "PartitionInfo", "RecordMetadata"):
        assert name in kclient.__all__
        assert getattr(kclient, name) is not None
    assert hints["callback"] == kclient.Callback | None
    assert hints["headers"] == collections.abc.Sequence[kclient.Header] | None
    returned = typing.get_type_hints(kclient.KafkaProducer.partitions_for)["return"]
    assert returned == list[kclient.PartitionInfo]
    assert inspect.isclass(kclient.TopicPartition)


def test_the_readme_imports_only_public_modules() -> None:
    imported = set(re.findall(r"^\s*from (kclient[\w.]*) import", README.read_text(), re.M))
    assert imported, "the README shows no imports: this test has nothing to check"
    assert imported <= PUBLIC_MODULES, imported - PUBLIC_MODULES


def test_every_public_class_and_function_has_its_docstring() -> None:
    """``help()`` shows what each public name is: none is defined in a module compiled with
    mypyc, which drops docstrings (a class gets an empty one or "mypyc filler docstring")."""
    import importlib

    undocumented = []
    for module_name in sorted(PUBLIC_MODULES | {"kclient.testing"}):
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if typing.get_origin(obj) is not None:  # an alias such as Callback (a class on 3.10)
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
                continue
            doc = (obj.__doc__ or "").strip()
            if not doc or doc == "mypyc filler docstring":
                undocumented.append(f"{module_name}.{name}")
    assert undocumented == []
