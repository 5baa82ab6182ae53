"""docs/architecture.md against the import layers CI enforces (`[tool.importlinter]`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text("utf-8")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"][
    "contracts"
]


def _contract(kind: str) -> dict[str, object]:
    (found,) = [contract for contract in CONTRACTS if contract["type"] == kind]
    return found


def _layer_modules() -> list[str]:
    layers = _contract("layers")["layers"]
    assert isinstance(layers, list)
    return [name.strip() for layer in layers for name in re.split(r"[|:]", layer)]


def test_the_architecture_names_every_layer_module() -> None:
    """Every module of the layers contract is named in docs/architecture.md."""
    missing = [name for name in _layer_modules() if not re.search(rf"\b{name}\b", ARCHITECTURE)]
    assert missing == []


def test_the_layers_cover_every_top_level_module() -> None:
    """The layers contract places every module and package directly under `durability`
    (import-linter's `exhaustive` checks the same, this says which is missing)."""
    package = ROOT / "src" / "durability"
    found = {
        path.stem if path.is_file() else path.name
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    assert found == set(_layer_modules())


def test_the_architecture_names_every_capability() -> None:
    """The independent capabilities of the contract are the ones the architecture lists."""
    modules = _contract("independence")["modules"]
    assert isinstance(modules, list)
    names = [module.removeprefix("durability.") for module in modules]
    assert [name for name in names if not re.search(rf"`{name}/?`", ARCHITECTURE)] == []
