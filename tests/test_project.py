"""`durability serve PROJECT_DIR`: wrangler config, entry module, bindings and vars."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from conftest import MakeRuntime
from durability.cli._serve.project import strip_jsonc
from durability.runtime.server import WorkerApp, WorkerModuleError, load_worker

ENTRY = """
import asyncio

from workers import DurableObject, Response, WorkerEntrypoint

done = []


class Greeter(DurableObject):
    async def greet(self, who):
        return f"{self.env.GREETING}, {who}"


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        async def later():
            done.append(request.url)

        self.ctx.waitUntil(later())
        text = await self.env.GREETERS.getByName("g").greet("you")
        return Response(text + " " + str(self.env.LIMIT))
"""

JSONC = """
{
  // The greeter project. "// not a comment" stays in strings.
  "name": "greeter-project",
  "main": "src/entry.py",
  /* block
     comment */
  "durable_objects": {"bindings": [{"name": "GREETERS", "class_name": "Greeter"},],},
  "vars": {"GREETING": "hi // there", "LIMIT": 3,},
}
"""

TOML = """
name = "greeter-toml"
main = "src/entry.py"
[[durable_objects.bindings]]
name = "GREETERS"
class_name = "Greeter"
[vars]
GREETING = "hello"
LIMIT = 4
"""


def _project(root: Path, config_name: str, config: str, entry: str = ENTRY) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "entry.py").write_text(textwrap.dedent(entry))
    (root / config_name).write_text(config)
    return root


def test_strip_jsonc_keeps_strings_and_drops_comments_and_trailing_commas() -> None:
    """Comments and trailing commas go; the same characters inside strings stay."""
    text = '{"a": "x // y /* z */", // c\n "b": [1, 2,], /* d */ "c": "\\" ,]",}'
    assert json.loads(strip_jsonc(text)) == {"a": "x // y /* z */", "b": [1, 2], "c": '" ,]'}


@pytest.mark.parametrize(
    ("config_name", "config", "expected"),
    [("wrangler.jsonc", JSONC, "hi // there, you 3"), ("wrangler.toml", TOML, "hello, you 4")],
)
async def test_project_is_served_as_wrangler_dev_would(
    tmp_path: Path, config_name: str, config: str, expected: str, make_runtime: MakeRuntime
) -> None:
    """main's Default serves fetch with self.env (classes and vars) and self.ctx.waitUntil."""
    worker = load_worker(str(_project(tmp_path / config_name, config_name, config)))
    assert set(worker.bindings) == {"GREETERS", "GREETING", "LIMIT"}
    async with make_runtime(bindings=worker.bindings) as runtime:
        app = WorkerApp(worker, runtime)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            response = await client.get("/x")
        assert (response.status_code, response.text) == (200, expected)
        assert worker.settle is not None
        await asyncio.sleep(0)
        await worker.settle()
    assert sys.modules[worker.name].done == ["http://p/x"]


@pytest.mark.parametrize(
    ("config", "entry", "message"),
    [
        ('{"name": "x"}', ENTRY, "`main` must name the entry module"),
        ('{"main": "src/other.py"}', ENTRY, "does not exist"),
        ('{"main": "src/entry.py"', ENTRY, "not valid JSONC"),
        ('{"main": "src/entry.py"}', "x = 1\n", "class Default(WorkerEntrypoint)"),
        (
            '{"main": "src/entry.py", "durable_objects": {"bindings": [{"name": "A"}]}}',
            ENTRY,
            "needs a `name` and a `class_name`",
        ),
        (
            '{"main": "src/entry.py", "durable_objects": '
            '{"bindings": [{"name": "A", "class_name": "Nope"}]}}',
            ENTRY,
            "no DurableObject class 'Nope'",
        ),
        (
            '{"main": "src/entry.py", "durable_objects": {"bindings": '
            '[{"name": "A", "class_name": "Greeter", "script_name": "other"}]}}',
            ENTRY,
            "another script",
        ),
        (
            '{"main": "src/entry.py", "vars": {"A": 1}, "durable_objects": '
            '{"bindings": [{"name": "A", "class_name": "Greeter"}]}}',
            ENTRY,
            "both a var and a Durable Object",
        ),
    ],
)
def test_bad_projects_name_the_problem(
    tmp_path: Path, config: str, entry: str, message: str
) -> None:
    """A bad config or entry module is refused with a message naming what is wrong."""
    project = _project(tmp_path / "p", "wrangler.jsonc", config, entry)
    with pytest.raises(WorkerModuleError, match=re.escape(message)):
        load_worker(str(project))


def test_a_folder_without_config_is_refused(tmp_path: Path) -> None:
    """A folder that has no wrangler config is not a project."""
    with pytest.raises(WorkerModuleError, match="without wrangler"):
        load_worker(str(tmp_path))


SHORT_HANDLERS = """
from js import WebSocketPair
from workers import DurableObject, Response, WorkerEntrypoint

fired = []


class Quiet(DurableObject):
    async def fetch(self):
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws):
        ws.send("heard, without the message")

    async def webSocketClose(self, ws):
        fired.append("closed")


class Default(WorkerEntrypoint):
    async def fetch(self):
        return Response("served without the request")

    async def scheduled(self):
        fired.append("scheduled")

    async def socket(self):
        return await self.env.QUIET.getByName("q").fetch("http://q/")
"""


async def test_handlers_declared_with_fewer_parameters_get_the_first_ones(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """As workerd does, `fetch(self)`, `scheduled(self)`, `webSocketMessage(self, ws)` and
    `webSocketClose(self, ws)` are called with the arguments they declare."""
    config = (
        '{"main": "src/entry.py", "durable_objects": '
        '{"bindings": [{"name": "QUIET", "class_name": "Quiet"}]}}'
    )
    worker = load_worker(str(_project(tmp_path, "wrangler.jsonc", config, SHORT_HANDLERS)))
    module = sys.modules[worker.name]
    async with make_runtime(bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            assert (await client.get("/x")).text == "served without the request"
            fired = await client.get("/cdn-cgi/handler/scheduled?cron=*+*+*+*+*")
            assert (fired.status_code, module.fired) == (200, ["scheduled"])
        assert worker.project is not None
        response = await module.Default(worker.project.context, runtime.env).socket()
        client_end = response.web_socket
        client_end.accept()
        heard: list[object] = []
        client_end.addEventListener("message", lambda event: heard.append(event.data))
        client_end.send("hello")
        client_end.close(1000, "bye")
        for _ in range(20):
            await asyncio.sleep(0)
        assert (heard, module.fired) == (["heard, without the message"], ["scheduled", "closed"])
