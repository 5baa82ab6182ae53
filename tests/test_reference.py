"""The documentation site: every public name has an API reference entry with a docstring,
and every page of docs/ is in the site's navigation."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import griffe
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
PUBLIC_MODULES = [
    "durability",
    "durability.runtime",
    "durability.testing",
    "durability.routing",
    "durability.transforms",
    "durability.cloudflare",
    "durability.cold",
]
PUBLIC_NAMES = [
    f"{module}.{name}"
    for module in PUBLIC_MODULES
    for name in importlib.import_module(module).__all__
]
_ENTRY = re.compile(r"^::: ([\w.]+)$", re.MULTILINE)


def _entries() -> set[str]:
    return {entry for page in REFERENCE.glob("*.md") for entry in _ENTRY.findall(page.read_text())}


def _value(name: str) -> object:
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def test_every_public_name_has_a_reference_entry() -> None:
    """Each name of `__all__` of the package and of its public modules is rendered by a
    `::: module.name` entry of docs/reference (a name two modules export, such as
    `durability.RoutingLoad` and `durability.routing.RoutingLoad`, by either)."""
    entries = _entries()
    rendered = [_value(entry) for entry in entries if entry not in PUBLIC_MODULES]
    missing = [
        name
        for name in PUBLIC_NAMES
        if name not in entries and not any(_value(name) is value for value in rendered)
    ]
    assert missing == []


def test_every_reference_entry_is_a_public_name() -> None:
    """No entry names something gone or private (each is a module or one of its names)."""
    assert sorted(_entries() - set(PUBLIC_NAMES) - set(PUBLIC_MODULES)) == []


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    """The package as the docs site reads it: statically, from src/."""
    loaded = griffe.load("durability", search_paths=[str(ROOT / "src")])
    assert isinstance(loaded, griffe.Module)
    return loaded


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_every_public_name_has_a_docstring(package: griffe.Module, name: str) -> None:
    """The reference shows a description for the name: its docstring is not empty."""
    docstring = package[name.removeprefix("durability.")].docstring
    assert docstring is not None and docstring.value.strip(), f"{name} has no docstring"


def _nav_pages(entries: object) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def test_every_page_of_docs_is_in_the_navigation() -> None:
    """mkdocs.yml's nav lists each Markdown page under docs/, and nothing else."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))
    assert sorted(_nav_pages(config["nav"])) == pages
