"""The parts of a wrangler config `durability serve` reads beside `main` and the
Durable Object bindings: `vars` with `.dev.vars`, `assets`, `triggers`, and which keys
it cannot serve (named once, at start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .assets import HTML_HANDLING, NOT_FOUND_HANDLING, AssetsConfig
from .dotenv import DotenvError, read_dotenv

__all__ = ["read_assets", "read_vars", "unserved_keys"]

SERVED = frozenset(
    {
        "$schema",
        "name",
        "main",
        "compatibility_date",
        "compatibility_flags",
        "durable_objects",
        "migrations",
        "vars",
        "assets",
        "triggers",
    }
)
"""Keys `durability serve` acts on."""

DEPLOY_ONLY = frozenset(
    {
        "account_id",
        "alias",
        "base_dir",
        "build",
        "compliance_region",
        "define",
        "dev",
        "env",
        "find_additional_modules",
        "keep_names",
        "keep_vars",
        "limits",
        "logpush",
        "minify",
        "no_bundle",
        "observability",
        "placement",
        "preserve_file_names",
        "preview_urls",
        "route",
        "routes",
        "rules",
        "send_metrics",
        "tail_consumers",
        "upload_source_maps",
        "usage_model",
        "workers_dev",
    }
)
"""Keys that shape a deployment (or `wrangler` itself) and change nothing a local run
answers: accepted silently."""

NOT_SERVED = frozenset(
    {
        "ai",
        "analytics_engine_datasets",
        "browser",
        "containers",
        "d1_databases",
        "data_blobs",
        "dispatch_namespaces",
        "hyperdrive",
        "images",
        "kv_namespaces",
        "mtls_certificates",
        "pipelines",
        "queues",
        "r2_buckets",
        "ratelimits",
        "secrets_store_secrets",
        "send_email",
        "services",
        "site",
        "text_blobs",
        "unsafe",
        "vectorize",
        "version_metadata",
        "vpc_services",
        "wasm_modules",
        "worker_loaders",
    }
)
"""Bindings and features of Cloudflare that a local run lacks: named at start."""

_ASSET_KEYS = frozenset(
    {"directory", "binding", "html_handling", "not_found_handling", "run_worker_first"}
)


def unserved_keys(config: dict[str, Any]) -> list[str]:
    """The top-level keys `durability serve` ignores although they change answers:
    Cloudflare bindings it lacks, and keys it does not know."""
    names = []
    for key in config:
        if key in NOT_SERVED:
            names.append(key)
        elif key not in SERVED and key not in DEPLOY_ONLY:
            names.append(f"{key} (unknown key)")
    return names


def read_vars(config: dict[str, Any], root: Path, where: Path) -> dict[str, Any]:
    """`vars` (JSON values as given), overridden by `.dev.vars` (strings); without a
    `.dev.vars`, by `.env`, as wrangler reads them."""
    values = config.get("vars", {})
    if not isinstance(values, dict):
        raise ValueError(f"{where}: `vars` must be an object of names to values")
    merged: dict[str, Any] = dict(values)
    for name in (".dev.vars", ".env"):
        file = root / name
        if file.is_file():
            try:
                merged.update(read_dotenv(file))
            except DotenvError as error:
                raise ValueError(str(error)) from None
            break
    return merged


def read_assets(
    config: dict[str, Any], root: Path, where: Path
) -> tuple[AssetsConfig | None, list[str]]:
    """The `assets` section (or `None`), and what of it is not served, for the warning."""
    section = config.get("assets")
    if section is None:
        return None, []
    if not isinstance(section, dict) or not isinstance(section.get("directory"), str):
        raise ValueError(f"{where}: `assets` must be an object with a `directory`")
    directory = root / section["directory"]
    if not directory.is_dir():
        raise ValueError(f"{where}: the assets directory {section['directory']} does not exist")
    ignored = [f"assets.{key} (unknown key)" for key in section if key not in _ASSET_KEYS]
    binding = section.get("binding")
    if binding is not None and (not isinstance(binding, str) or not binding.isidentifier()):
        raise ValueError(f"{where}: `assets.binding` must be a binding name")
    html = section.get("html_handling", "auto-trailing-slash")
    if html not in HTML_HANDLING:
        ignored.append(f"assets.html_handling={html!r} (auto-trailing-slash is used)")
        html = "auto-trailing-slash"
    not_found = section.get("not_found_handling", "none")
    if not_found not in NOT_FOUND_HANDLING:
        raise ValueError(
            f"{where}: `assets.not_found_handling` must be one of {', '.join(NOT_FOUND_HANDLING)}"
        )
    first = section.get("run_worker_first", False)
    if isinstance(first, list) and all(isinstance(rule, str) for rule in first):
        first = tuple(first)
    elif not isinstance(first, bool):
        raise ValueError(f"{where}: `assets.run_worker_first` must be a bool or a list of routes")
    for special in ("_headers", "_redirects"):
        if (directory / special).is_file():
            ignored.append(f"assets {special} file")
    return AssetsConfig(directory, binding, html, not_found, first), ignored
