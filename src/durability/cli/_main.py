"""The `durability` command.

`durability serve PROJECT_DIR` serves a Cloudflare-shaped project (a folder with
`wrangler.jsonc` or `wrangler.toml`) and `durability serve MODULE` a worker module (its
`bindings` and `async def fetch(request, env)`) over HTTP with a file-backed runtime;
`durability inspect PATH` shows what the objects stored under a runtime path hold and
owe; `durability check DATA --worker WORKER` reports, before a deploy, the stored
pending work the new code cannot run. Run without a command, it prints help.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._distribution import DISTRIBUTION, install_hint

__all__ = ["main"]

EXIT_USAGE = 2
"""Exit code for a command that cannot start: bad arguments, a bad worker module."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `durability` command line; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "serve":
        return _serve(args)
    if args.command == "inspect":
        from ._inspect_command import run

        return run(args.path, args.namespace, args.name, args.json)
    if args.command == "check":
        from ._check import run as check

        return check(args.data, args.worker, args.json)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="durability",
        description="Durable, crash-safe building blocks for per-entity actors.",
    )
    parser.add_argument("--version", action="version", version=f"durability {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve a worker project or module over HTTP with a file-backed runtime",
        description=(
            "Serve a Cloudflare-shaped project folder (wrangler.jsonc or wrangler.toml: "
            "`main`, `durable_objects.bindings`, `vars`) as `wrangler dev` would, or a "
            "worker module (DurableObject classes, a `bindings` dict and "
            "`async def fetch(request, env)`), over HTTP, with a read-only dashboard of "
            "the objects at /_durability. Ctrl-C stops it cleanly."
        ),
    )
    serve.add_argument(
        "module",
        metavar="PROJECT_DIR|MODULE",
        help="a folder with wrangler.jsonc or wrangler.toml, a .py file, or a dotted module name",
    )
    serve.add_argument(
        "--path",
        default=None,
        help=(
            "directory of the objects' SQLite files (default: .durability in the project "
            "folder, or in the current directory for a worker module)"
        ),
    )
    serve.add_argument("--port", type=int, default=8787, help="TCP port (default: 8787)")
    serve.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1)")
    serve.add_argument(
        "--virtual-time",
        action="store_true",
        help=(
            "run on a virtual clock that only POST /_durability/advance?ms=N moves "
            "(for demos and manual tests)"
        ),
    )
    _serve_limits(serve)
    serve.add_argument(
        "--test-scheduled",
        action="store_true",
        help="fire the project's scheduled() handler on GET /__scheduled?cron=... "
        "(as wrangler dev --test-scheduled)",
    )
    inspect = commands.add_parser(
        "inspect",
        help="show the objects under a runtime path: pending work, failures, alarms, logs",
        description=(
            "Show each object stored under a runtime path (read-only; safe while a "
            "runtime serves it): its name, file size, alarm, operations, named alarms, "
            "log cursors and leases, and fanout backlog."
        ),
    )
    inspect.add_argument("path", metavar="PATH", help="the runtime's --path directory")
    inspect.add_argument("namespace", metavar="NAMESPACE", nargs="?", help="one binding only")
    inspect.add_argument("name", metavar="NAME", nargs="?", help="one object: its name or id")
    inspect.add_argument("--json", action="store_true", help="print one JSON document")
    _check_command(commands)
    return parser


def _check_command(commands: Any) -> None:
    """`check DATA --worker WORKER [--json]` (its work is in `_check`)."""
    check = commands.add_parser(
        "check",
        help="before a deploy: stored pending work the new code cannot run",
        description=(
            "Read a runtime's data folder (read-only; safe while a runtime serves it) and "
            "report the pending operations, named alarms, recurrences and fanout "
            "deliveries whose handler the new code no longer has, or whose stored payload "
            "no longer fits it, and the migrations the new code would apply or refuse. "
            "Exit 0: nothing found; 1: findings; 2: bad arguments."
        ),
    )
    check.add_argument("data", metavar="DATA", help="the runtime's data folder (its --path)")
    check.add_argument(
        "--worker",
        required=True,
        metavar="WORKER",
        help="the new code, as serve takes it: a project folder, a .py file or a module",
    )
    check.add_argument("--json", action="store_true", help="print one JSON document")


def _serve_limits(serve: argparse.ArgumentParser) -> None:
    """The options bounding what `serve` accepts (docs/runtime.md, "Serving safely")."""
    limits = serve.add_argument_group("limits")
    limits.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help=(
            "also answer requests whose Host is NAME (repeatable); others than the bound "
            "address get 403, against DNS rebinding"
        ),
    )
    limits.add_argument(
        "--max-body-bytes",
        type=int,
        default=100_000_000,
        metavar="N",
        help="request bodies over N bytes get 413 (default: 100000000, Cloudflare's 100 MB)",
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help=(
            "open connections at most; past it the longest idle one is closed "
            "(default: an eighth of the open-file limit, 16 to 1000)"
        ),
    )
    limits.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection whose request headers are not complete by then (default: 10)",
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "(not installed)"


def _serve(args: argparse.Namespace) -> int:
    for module in ("uvicorn", "wsproto"):
        if importlib.util.find_spec(module) is None:
            return _fail(f"needs {module}: {install_hint('serve')}")
    from .._virtual_clock import VirtualClock
    from ..runtime import Runtime
    from ._serve.checks import ignore_state, import_failure, path_problem, port_problem
    from ._serve.server import WorkerApp, WorkerModuleError, load_worker
    from ._serve.serving import ServeLimits, build_server

    if not 0 <= args.port <= 65_535:
        return _fail("--port must be between 0 and 65535")
    limit_problem = _limit_problem(args)
    if limit_problem is not None:
        return _fail(limit_problem)
    try:
        worker = load_worker(args.module, test_scheduled=args.test_scheduled)
    except WorkerModuleError as error:
        return _fail(str(error))
    except Exception as error:
        return _fail(import_failure(args.module, error))
    project = worker.project
    path = Path(args.path) if args.path is not None else Path(".durability")
    if args.path is None and project is not None:
        path = project.state_path
    clock = VirtualClock(start_ms=int(time.time() * 1000)) if args.virtual_time else None
    try:
        runtime = Runtime(path=path, bindings=worker.bindings, clock=clock)
    except (TypeError, ValueError) as error:
        return _fail(f"{args.module}: {error}")
    problem = path_problem(path) or port_problem(args.host, args.port)
    if problem is not None:
        return _fail(problem)
    logging.basicConfig(level=logging.INFO, format="%(levelname)-9s %(message)s")
    log = logging.getLogger("durability.serve")
    if project is not None:
        if args.path is None:
            ignore_state(path)
        try:
            applied = project.prepare(path)
        except ValueError as error:
            return _fail(f"{args.module}: {error}")
        for line in project.warnings:
            log.warning(line)
        for line in applied:
            log.info(line)
    log.info(
        "Serving %s (bindings: %s), data in %s",
        args.module,
        ", ".join(worker.bindings) or "none",
        path,
    )
    log.info("Dashboard: http://%s:%s/_durability", _url_host(args.host), args.port)
    app = WorkerApp(worker, runtime)
    if args.virtual_time:
        log.info("Virtual time: POST /_durability/advance?ms=N moves the clock forward")
    limits = ServeLimits(
        allowed_hosts=tuple(args.allowed_host),
        max_body_bytes=args.max_body_bytes,
        header_timeout_s=args.header_timeout,
        **({} if args.max_connections is None else {"max_connections": args.max_connections}),
    )
    server = build_server(app, args.host, args.port, limits, virtual_time=args.virtual_time)
    # uvicorn re-raises the SIGINT it handled once its graceful shutdown is over.
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started and app.closed else 1


def _limit_problem(args: argparse.Namespace) -> str | None:
    """Why the limits given to `serve` cannot work, or `None`."""
    if args.max_body_bytes < 0:
        return "--max-body-bytes must be 0 or more"
    if args.max_connections is not None and args.max_connections < 1:
        return "--max-connections must be at least 1"
    if not args.header_timeout > 0:
        return "--header-timeout must be more than 0 seconds"
    for name in args.allowed_host:
        if not name.strip() or any(character in name for character in "/: \t"):
            return f"--allowed-host takes a host name without port or scheme, got {name!r}"
    return None


def _url_host(host: str) -> str:
    """`host` as it goes in a URL (IPv6 addresses in brackets)."""
    return f"[{host}]" if ":" in host else host


def _fail(message: str) -> int:
    print(f"durability serve: {message}", file=sys.stderr)
    return EXIT_USAGE
