"""Cloudflare-shaped projects: a folder with `wrangler.jsonc` (or `.json`, `.toml`).

Read as `wrangler dev` reads it: `main` is the entry module, whose `Default`
(a `WorkerEntrypoint`) serves `fetch(self, request)` (and `scheduled` for
`triggers.crons`, see `scheduled`); `durable_objects.bindings` name the entry
module's `DurableObject` classes, `workflows` entries bind its `WorkflowEntrypoint`
classes as Cloudflare Workflows, `migrations` apply to their stored objects (see
`class_migrations`); `vars` and `.dev.vars` become plain `env` values; `assets` are
served before the worker (see `assets`). Keys that only shape a deployment are
accepted silently; those naming what a local run lacks are named once, at start
(`Project.warnings`, see `project_config`).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from ...runtime._compat import set_compatibility
from ...runtime._http import Response
from ...runtime._object import DurableObject
from ...runtime._relaxed import call_relaxed
from ...runtime._stand_ins import install_stand_ins
from ...runtime._workers import ExecutionContext, importing_with
from .assets import AssetsBinding, StaticAssets
from .class_migrations import MigrationError, Migrations, parse_migrations
from .project_config import read_assets, read_vars, unserved_keys
from .scheduled import (
    MANUAL_PATHS,
    TEST_PATH,
    CronDriver,
    ScheduledController,
    check_crons,
    fire_by_hand,
    run_scheduled,
)
from .workflows import workflow_binding

CONFIG_NAMES = ("wrangler.jsonc", "wrangler.json", "wrangler.toml")
"""The config files looked for, in this order (as wrangler does)."""

STATE_FOLDER = ".durability"
"""The folder in a project where `durability serve` keeps its objects by default."""


class ProjectError(Exception):
    """A project folder's config or entry module is missing or malformed."""


@dataclass
class Project:
    """A loaded project: its entry module and `Default` class (both `None` for a project
    of static assets only), bindings, worker ctx, and what else its config asks for."""

    module: ModuleType | None
    entrypoint: type | None
    bindings: dict[str, Any]
    context: ExecutionContext
    root: Path
    warnings: list[str] = field(default_factory=list)
    """One line naming what of the config is not served (empty when all is)."""
    assets: StaticAssets | None = None
    crons: list[str] = field(default_factory=list)
    migrations: Migrations = field(default_factory=Migrations)
    classes: dict[str, str] = field(default_factory=dict)
    """Durable Object binding name -> class name, as the config gives them."""
    test_scheduled: bool = False
    _driver: CronDriver | None = None

    @property
    def state_path(self) -> Path:
        """Where the project keeps its objects unless told otherwise (as `wrangler dev`
        keeps `.wrangler/state`): `.durability` in the project folder."""
        return self.root / STATE_FOLDER

    async def fetch(self, request: Any, env: Any) -> Any:
        """Serve one request as `wrangler dev` does: a scheduled trigger by hand, else a
        static asset, else a new `Default(ctx, env)` and its `fetch`."""
        path = urlsplit(request.url).path
        if path in MANUAL_PATHS or (self.test_scheduled and path == TEST_PATH):
            return await fire_by_hand(request, lambda controller: self.scheduled(env, controller))
        assets = self.assets
        if assets is not None and not assets.worker_first(request):
            found = assets.lookup(request)
            if found is not None:
                return found
            if self.entrypoint is None or assets.navigation(request):
                return assets.not_found(request)
        if self.entrypoint is None:
            return Response("Not Found\n", status=404)
        result = call_relaxed(self.entrypoint(self.context, env).fetch, request)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def scheduled(self, env: Any, controller: ScheduledController) -> None:
        """Run the entry point's `scheduled` handler once."""
        if self.entrypoint is None:
            raise LookupError("the project has no entry module with a scheduled() handler")
        await run_scheduled(self.entrypoint, self.context, env, controller)

    def prepare(self, state: Path) -> list[str]:
        """Apply the migrations not yet applied to the objects under `state`."""
        return self.migrations.apply(state, self.classes)

    async def start(self, env: Any) -> None:
        """Start the cron triggers (on the running loop and the runtime's clock)."""
        if self.crons and self._driver is None:
            self._driver = CronDriver(
                self.crons, lambda controller: self.scheduled(env, controller)
            )
            self._driver.start()

    async def settle(self) -> None:
        """Stop the cron triggers and the worker's `waitUntil` work."""
        if self._driver is not None:
            await self._driver.stop()
        await self.context.settle()


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


def load_project(folder: str | Path, *, test_scheduled: bool = False) -> Project:
    """Load the project in `folder`; `ProjectError` names what is missing or wrong.

    `test_scheduled` answers `GET /__scheduled` (as `wrangler dev --test-scheduled`).
    """
    root = Path(folder)
    config_path = find_config(root)
    if config_path is None:
        raise ProjectError(f"{root} has no {', '.join(CONFIG_NAMES[:-1])} or {CONFIG_NAMES[-1]}")
    config = read_config(config_path)
    try:
        assets_config, notes = read_assets(config, root, config_path)
        variables = read_vars(config, root, config_path)
        migrations = parse_migrations(config.get("migrations"), str(config_path))
    except ValueError as error:
        raise ProjectError(str(error)) from None
    module, entrypoint = _entry(config, root, config_path, assets_config is not None, variables)
    bindings = _object_bindings(config, module, config_path)
    classes = {name: cls.__name__ for name, cls in bindings.items()}
    if module is not None:
        for name, value in _workflow_bindings(config, module, config_path).items():
            if name in bindings:
                raise ProjectError(f"{config_path}: {name!r} is bound twice")
            bindings[name] = value
    try:
        migrations.check_bindings(_class_names(config), str(config_path))
    except MigrationError as error:
        raise ProjectError(str(error)) from None
    assets = StaticAssets(assets_config) if assets_config is not None else None
    for name, value in variables.items():
        if name in bindings:
            raise ProjectError(f"{config_path}: {name!r} is both a var and a Durable Object")
        bindings[name] = value
    if assets is not None and assets.config.binding is not None:
        if assets.config.binding in bindings:
            raise ProjectError(
                f"{config_path}: the assets binding {assets.config.binding!r} is also a var "
                "or a Durable Object"
            )
        bindings[assets.config.binding] = AssetsBinding(assets)
    crons, cron_notes = _crons(config, config_path)
    items = [*unserved_keys(config), *notes, *migrations.notes, *cron_notes]
    warnings = [f"{config_path.name}: not served here: {', '.join(items)}"] if items else []
    return Project(
        module,
        entrypoint,
        bindings,
        ExecutionContext(),
        root,
        warnings,
        assets,
        crons,
        migrations,
        classes,
        test_scheduled,
    )


def _entry(
    config: dict[str, Any],
    root: Path,
    where: Path,
    has_assets: bool,
    variables: dict[str, Any],
) -> tuple[ModuleType | None, type | None]:
    """The entry module (imported with `variables` as `workers.env`, as on Cloudflare)
    and its `Default`; none for a project of static assets only."""
    main = config.get("main")
    if main is None and has_assets:
        return None, None
    if not isinstance(main, str) or not main.endswith(".py"):
        raise ProjectError(f"{where}: `main` must name the entry module (a .py file)")
    entry = root / main
    if not entry.is_file():
        raise ProjectError(f"{where}: the entry module {main} does not exist")
    set_compatibility(config.get("compatibility_date"), config.get("compatibility_flags"))
    with importing_with(variables):
        module = _import_entry(entry, config.get("name"))
    entrypoint = getattr(module, "Default", None)
    if not inspect.isclass(entrypoint) or not callable(getattr(entrypoint, "fetch", None)):
        raise ProjectError(
            f"{main} must define `class Default(WorkerEntrypoint)` with `fetch(self, request)`"
        )
    return module, entrypoint


def _crons(config: dict[str, Any], where: Path) -> tuple[list[str], list[str]]:
    """The cron triggers to drive, and a note when they cannot be."""
    triggers = config.get("triggers", {})
    if not isinstance(triggers, dict):
        raise ProjectError(f"{where}: `triggers` must be an object")
    notes = [f"triggers.{key} (unknown key)" for key in triggers if key != "crons"]
    if not triggers.get("crons"):
        return [], notes
    try:
        return check_crons(triggers["crons"], str(where)), notes
    except ImportError:
        notes.append(
            "triggers.crons (needs the cron extra: pip install 'durability[cron]'; "
            "/cdn-cgi/handler/scheduled still fires the handler)"
        )
        return [], notes
    except ValueError as error:
        raise ProjectError(str(error)) from None


def _class_names(config: dict[str, Any]) -> dict[str, str]:
    section = config.get("durable_objects")
    entries = section.get("bindings", []) if isinstance(section, dict) else []
    return {
        entry["name"]: entry["class_name"]
        for entry in entries
        if isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and isinstance(entry.get("class_name"), str)
    }


def _object_bindings(
    config: dict[str, Any], module: ModuleType | None, where: Path
) -> dict[str, Any]:
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


def _workflow_bindings(config: dict[str, Any], module: ModuleType, where: Path) -> dict[str, Any]:
    """The `workflows` entries: each binds a class with `run(event, step)` of the entry
    module (its instances are objects of a namespace named after the binding)."""
    entries = config.get("workflows", [])
    if not isinstance(entries, list):
        raise ProjectError(f"{where}: `workflows` must be a list")
    if not entries:
        return {}
    bindings: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key), str) for key in ("name", "binding", "class_name")
        ):
            raise ProjectError(
                f"{where}: each workflow needs a `name`, a `binding` and a `class_name`"
            )
        if "script_name" in entry:
            raise ProjectError(
                f"{where}: workflow {entry['binding']!r} names another script (`script_name`), "
                "which durability serve cannot run"
            )
        cls = getattr(module, entry["class_name"], None)
        if not (inspect.isclass(cls) and callable(getattr(cls, "run", None))):
            raise ProjectError(
                f"{where}: workflow {entry['binding']!r}: the entry module has no "
                f"WorkflowEntrypoint class {entry['class_name']!r}"
            )
        try:
            bindings[entry["binding"]] = workflow_binding(cls, entry["name"])
        except ValueError as error:
            raise ProjectError(f"{where}: workflow {entry['binding']!r}: {error}") from None
    return bindings


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
