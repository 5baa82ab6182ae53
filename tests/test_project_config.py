"""The wrangler config pieces `durability serve` reads: dotenv files, Cloudflare's cron
days, migrations applied to local state, and static assets' answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from durability.cli._serve.dotenv import DotenvError, parse_dotenv
from durability.cli._serve.project import ProjectError, load_project
from durability.cli._serve.scheduled import standard_cron
from durability.runtime import Runtime
from durability.runtime.server import WorkerApp, load_worker

COUNTER = """
from workers import DurableObject, Response, WorkerEntrypoint


class {name}(DurableObject):
    async def bump(self):
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS n (x)")
        self.ctx.storage.sql.exec("INSERT INTO n VALUES (1)")
        return self.ctx.storage.sql.exec("SELECT count(*) AS c FROM n").one().c


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response(str(await self.env.COUNTERS.getByName("a").bump()))
"""


def write(folder: Path, config: dict[str, Any], files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wrangler.json").write_text(json.dumps(config))
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


# -- dotenv ---------------------------------------------------------------------------


def test_dotenv_reads_quotes_escapes_comments_and_export() -> None:
    """Unquoted values end at ` #`, single quotes are literal, double quotes escape and
    span lines, `export` is allowed, and a later assignment wins."""
    text = (
        '# comment\n\nA=1\nexport B = two words # note\nC="x\\ny \\"q\\"\nz" # c\n'
        "D='raw \\n'\nE=\nA=again\n"
    )
    assert parse_dotenv(text) == {
        "A": "again",
        "B": "two words",
        "C": 'x\ny "q"\nz',
        "D": "raw \\n",
        "E": "",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [("not an assignment", "line 1 is not NAME=value"), ('A="open', "never closed")],
)
def test_dotenv_refuses_bad_lines(text: str, message: str) -> None:
    """A line that is not an assignment, or an unclosed quote, is named."""
    with pytest.raises(DotenvError, match=message):
        parse_dotenv(text)


def test_env_file_is_read_only_without_dev_vars(tmp_path: Path) -> None:
    """`.env` overrides `vars` when there is no `.dev.vars`, as wrangler reads them."""
    entry = COUNTER.format(name="Counter")
    config = {"main": "entry.py", "vars": {"A": "var", "B": 2}}
    project = write(tmp_path / "p", config, {"entry.py": entry, ".env": "A=env\n"})
    assert load_project(project).bindings == {"A": "env", "B": 2}
    (project / ".dev.vars").write_text("B=dev\n")
    assert load_project(project).bindings == {"A": "var", "B": "dev"}


# -- cron days --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cloudflare", "standard"),
    [
        ("0 17 * * 1", "0 17 * * 0"),
        ("10 7 * * 2-6", "10 7 * * 1-5"),
        ("0 18 * * 6L", "0 18 * * 5L"),
        ("0 10 * * 2#2,7", "0 10 * * 1#2,6"),
        ("0 9 * * 1-7/2", "0 9 * * 0-6/2"),
        ("0 17 * * sun", "0 17 * * sun"),
        ("*/15 * * * *", "*/15 * * * *"),
    ],
)
def test_cloudflare_days_of_the_week_count_from_sunday(cloudflare: str, standard: str) -> None:
    """Cloudflare's 1-7 (1 = Sunday) become cron's 0-6; names and steps stay."""
    assert standard_cron(cloudflare) == standard


def test_a_bad_cron_is_refused_at_load(tmp_path: Path) -> None:
    """A cron with a day 0, or not five fields, is named when the project loads."""
    entry = COUNTER.format(name="Counter")
    for crons in (["0 9 * * 0"], ["* * *"]):
        config = {"main": "entry.py", "triggers": {"crons": crons}}
        with pytest.raises(ProjectError, match=r"triggers\.crons"):
            load_project(write(tmp_path / "p", config, {"entry.py": entry}))


# -- migrations ---------------------------------------------------------------------------


def counter_project(folder: Path, class_name: str, migrations: list[Any]) -> Path:
    config = {
        "main": "entry.py",
        "durable_objects": {"bindings": [{"name": "COUNTERS", "class_name": class_name}]},
        "migrations": migrations,
    }
    return write(folder, config, {"entry.py": COUNTER.format(name=class_name)})


async def bump(project: Path, state: Path) -> str:
    """Apply the project's migrations to `state`, then count once through its fetch."""
    worker = load_worker(str(project))
    assert worker.project is not None
    worker.project.prepare(state)
    async with Runtime(path=state, bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            return (await client.get("/")).text


V1 = {"tag": "v1", "new_sqlite_classes": ["Counter"]}
V2 = {"tag": "v2", "renamed_classes": [{"from": "Counter", "to": "Tally"}]}


async def test_a_renamed_class_keeps_its_objects(tmp_path: Path) -> None:
    """`renamed_classes` makes the stored objects the new class's."""
    state = tmp_path / "state"
    assert await bump(counter_project(tmp_path / "v1", "Counter", [V1]), state) == "1"
    assert await bump(counter_project(tmp_path / "v2", "Tally", [V1, V2]), state) == "2"


async def test_a_deleted_class_loses_its_objects(tmp_path: Path) -> None:
    """`deleted_classes` deletes the class's stored objects, once."""
    state = tmp_path / "state"
    assert await bump(counter_project(tmp_path / "v1", "Counter", [V1]), state) == "1"
    v3 = [V1, {"tag": "v2", "deleted_classes": ["Counter"]}, {"tag": "v3", "new_classes": ["N"]}]
    later = counter_project(tmp_path / "v3", "N", v3)
    assert await bump(later, state) == "1"
    assert await bump(later, state) == "2"


async def test_a_binding_to_another_class_without_migration_is_refused(tmp_path: Path) -> None:
    """A binding whose folder holds another class's objects is an error; nothing moves."""
    state = tmp_path / "state"
    assert await bump(counter_project(tmp_path / "v1", "Counter", [V1]), state) == "1"
    other = load_project(counter_project(tmp_path / "v2", "Other", [V1]))
    with pytest.raises(ValueError, match="holds objects of class 'Counter'"):
        other.prepare(state)
    assert await bump(counter_project(tmp_path / "v1", "Counter", [V1]), state) == "2"


@pytest.mark.parametrize(
    ("class_name", "migrations", "message"),
    [
        ("Counter", [V1, {"tag": "v2", "deleted_classes": ["Counter"]}], "deletes class"),
        ("Counter", [V1, V2], "renames class 'Counter' to 'Tally'"),
        ("Counter", [{"tag": "v1", "transferred_classes": [{"from": "X"}]}], "another script"),
        ("Counter", [{"tag": "v1", "renamed_classes": ["X"]}], "{from, to}"),
        ("Counter", {"tag": "v1"}, "must be a list"),
    ],
)
def test_migrations_that_cannot_apply_are_refused(
    tmp_path: Path, class_name: str, migrations: Any, message: str
) -> None:
    """A bound class deleted or renamed away, a transfer, or a malformed list: named."""
    with pytest.raises(ProjectError, match=message.replace("{", r"\{").replace("}", r"\}")):
        load_project(counter_project(tmp_path / "p", class_name, migrations))


# -- assets ---------------------------------------------------------------------------------


def static_site(folder: Path, **assets: Any) -> Path:
    files = {
        "public/index.html": "home",
        "public/about.html": "about",
        "public/docs/index.html": "docs",
        "public/docs/404.html": "docs missing",
        "public/404.html": "missing",
        "public/.assetsignore": "secret.txt\n",
        "public/secret.txt": "hidden",
        "outside.txt": "outside",
    }
    return write(folder, {"assets": {"directory": "public", **assets}}, files)


async def answers(project: Path, *requests: tuple[str, dict[str, str]]) -> list[tuple[int, str]]:
    worker = load_worker(str(project))
    async with Runtime(bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://site") as client:
            out = []
            for path, headers in requests:
                response = await client.get(path, headers=headers)
                out.append(
                    (response.status_code, response.headers.get("location") or response.text)
                )
            return out


async def test_a_static_site_follows_html_handling(tmp_path: Path) -> None:
    """Without a worker: `/about` serves about.html, `/docs` redirects to `/docs/`,
    `.html` and `index.html` addresses redirect, ignored and outside files are not
    served, and a missing path gets 404."""
    site = static_site(tmp_path / "site")
    assert await answers(
        site,
        ("/", {}),
        ("/about", {}),
        ("/about.html", {}),
        ("/docs", {}),
        ("/docs/", {}),
        ("/docs/index.html", {}),
        ("/secret.txt", {}),
        ("/../outside.txt", {}),
        ("/%2e%2e/outside.txt", {}),
        ("/nope", {}),
    ) == [
        (200, "home"),
        (200, "about"),
        (307, "/about"),
        (307, "/docs/"),
        (200, "docs"),
        (307, "/docs/"),
        (404, ""),
        (404, ""),
        (404, ""),
        (404, ""),
    ]


async def test_not_found_handling_serves_the_nearest_404_page_or_the_app(
    tmp_path: Path,
) -> None:
    """ "404-page" serves the nearest 404.html with 404; "single-page-application"
    serves /index.html for a navigation."""
    pages = static_site(tmp_path / "pages", not_found_handling="404-page")
    assert await answers(pages, ("/docs/gone", {}), ("/gone", {})) == [
        (404, "docs missing"),
        (404, "missing"),
    ]
    app = static_site(tmp_path / "app", not_found_handling="single-page-application")
    assert await answers(app, ("/route/in/app", {"sec-fetch-mode": "navigate"})) == [(200, "home")]
