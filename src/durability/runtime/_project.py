"""Cloudflare-shaped projects: a folder with `wrangler.jsonc` (or `.json`, `.toml`).

Read as `wrangler dev` reads it: `main` is the entry module, whose `Default`
(a `WorkerEntrypoint`) serves `fetch(self, request)`; `durable_objects.bindings` name
the entry module's `DurableObject` classes; `vars` become plain `env` values. Other
keys (compatibility date and flags, migrations, ...) only matter on Cloudflare.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ._object import DurableObject
from ._stand_ins import install_stand_ins
from ._workers import ExecutionContext, importing_with

CONFIG_NAMES = ("wrangler.jsonc", "wrangler.json", "wrangler.toml")
"""The config files looked for, in this order (as wrangler does)."""


class ProjectError(Exception):
    """A project folder's config or entry module is missing or malformed."""


@dataclass(frozen=True)
class Project:
    """A loaded project: its entry module, `Default` class, bindings and worker ctx."""

    module: ModuleType
    entrypoint: type
    bindings: dict[str, Any]
    context: ExecutionContext

    async def fetch(self, request: Any, env: Any) -> Any:
        """Serve one request as Cloudflare does: a new `Default(ctx, env)`, then `fetch`."""
        result = self.entrypoint(self.context, env).fetch(request)
        if inspect.isawaitable(result):
            result = await result
        return result


def find_config(folder: Path) -> Path | None:
    """The project's config file, or `None` when `folder` has none."""
    for name in CONFIG_NAMES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def read_config(path: Path) -> dict[str, Any]:
    """The config as a dict; JSONC comments and trailing commas are allowed."""
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            config: Any = tomllib.loads(text)
        else:
            config = json.loads(strip_jsonc(text))
    except ValueError as error:
        raise ProjectError(f"{path}: not valid {path.suffix[1:].upper()}: {error}") from None
    if not isinstance(config, dict):
        raise ProjectError(f"{path}: the top level must be an object")
    return config


def strip_jsonc(text: str) -> str:
    """JSON text from JSONC: `//` and `/* */` comments and trailing commas removed."""
    out: list[str] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char == '"':
            end = index + 1
            while end < length and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[index : end + 1])
            index = end + 1
        elif text.startswith("//", index):
            newline = text.find("\n", index)
            index = length if newline == -1 else newline
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            if close == -1:
                raise ValueError("unterminated /* comment")
            out.append(" ")
            index = close + 2
        else:
            out.append(char)
            index += 1
    return _drop_trailing_commas("".join(out))


def _drop_trailing_commas(text: str) -> str:
    """Remove each comma (outside strings) followed only by blanks and `}` or `]`."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            in_string = char != '"' or escaped
            escaped = char == "\\" and not escaped
        elif char == '"':
            in_string = True
        elif char == "," and text[index + 1 :].lstrip()[:1] in ("}", "]"):
            continue
        out.append(char)
    return "".join(out)


def load_project(folder: str | Path) -> Project:
    """Load the project in `folder`; `ProjectError` names what is missing or wrong."""
    root = Path(folder)
    config_path = find_config(root)
    if config_path is None:
        raise ProjectError(f"{root} has no {', '.join(CONFIG_NAMES[:-1])} or {CONFIG_NAMES[-1]}")
    config = read_config(config_path)
    main = config.get("main")
    if not isinstance(main, str) or not main.endswith(".py"):
        raise ProjectError(f"{config_path}: `main` must name the entry module (a .py file)")
    entry = root / main
    if not entry.is_file():
        raise ProjectError(f"{config_path}: the entry module {main} does not exist")
    variables = _vars(config, config_path)
    with importing_with(variables):
        module = _import_entry(entry, config.get("name"))
    entrypoint = getattr(module, "Default", None)
    if not inspect.isclass(entrypoint) or not callable(getattr(entrypoint, "fetch", None)):
        raise ProjectError(
            f"{main} must define `class Default(WorkerEntrypoint)` with `fetch(self, request)`"
        )
    bindings = _object_bindings(config, module, config_path)
    for name, value in variables.items():
        if name in bindings:
            raise ProjectError(f"{config_path}: {name!r} is both a var and a Durable Object")
        bindings[name] = value
    return Project(module, entrypoint, bindings, ExecutionContext())


def _object_bindings(config: dict[str, Any], module: ModuleType, where: Path) -> dict[str, Any]:
    section = config.get("durable_objects", {})
    entries = section.get("bindings", []) if isinstance(section, dict) else None
    if not isinstance(entries, list):
        raise ProjectError(f"{where}: `durable_objects.bindings` must be a list")
    bindings: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key), str) for key in ("name", "class_name")
        ):
            raise ProjectError(
                f"{where}: each Durable Object binding needs a `name` and a `class_name`"
            )
        if "script_name" in entry:
            raise ProjectError(
                f"{where}: binding {entry['name']!r} names another script (`script_name`), "
                "which durability serve cannot run"
            )
        cls = getattr(module, entry["class_name"], None)
        if not (inspect.isclass(cls) and issubclass(cls, DurableObject)):
            raise ProjectError(
                f"{where}: binding {entry['name']!r}: the entry module has no DurableObject "
                f"class {entry['class_name']!r}"
            )
        bindings[entry["name"]] = cls
    return bindings


def _vars(config: dict[str, Any], where: Path) -> dict[str, Any]:
    values = config.get("vars", {})
    if not isinstance(values, dict):
        raise ProjectError(f"{where}: `vars` must be an object of names to values")
    return dict(values)


def _import_entry(entry: Path, project: object) -> ModuleType:
    """Import the entry module with its folder on `sys.path`, as workerd lays modules out."""
    install_stand_ins()
    resolved = entry.resolve()
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = resolved.stem
    if name in sys.modules:
        label = project if isinstance(project, str) else resolved.parent.parent.name
        name = f"_worker_{''.join(c if c.isalnum() else '_' for c in label)}_{resolved.stem}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ProjectError(f"cannot import {entry} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
