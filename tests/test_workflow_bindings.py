"""Wrangler `workflows` bindings: Cloudflare-shaped workflow projects, run as on Cloudflare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import WorkflowError
from durability.cli._serve.project import ProjectError, load_project
from durability.runtime import Request, Runtime
from durability.testing import VirtualClock

ENTRY = """
from urllib.parse import urlparse

from workers import Response, WorkerEntrypoint, WorkflowEntrypoint
from workers.workflows import NonRetryableError


class Pipeline(WorkflowEntrypoint):
    async def run(self, event, step):
        @step.do("load")
        async def load():
            return {"items": event.payload["items"]}

        @step.do("count", depends=[load], concurrent=True)
        async def count(loaded):
            return len(loaded["items"])

        total = await count()
        await step.sleep("cool down", "2 days")
        approval = await step.wait_for_event("approval", "approve", timeout="1 hour")
        if not approval.payload["ok"]:
            @step.do("refuse")
            async def refuse():
                raise NonRetryableError("refused by " + approval.payload["by"])

            await refuse()
        return {"total": total, "by": approval.payload["by"], "id": event.instance_id}


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlparse(request.url).path.strip("/").split("/")
        if request.method == "POST" and parts[0] == "start":
            instance = await self.env.PIPELINE.create(id=parts[1], params=await request.json())
            return Response.json({"id": instance.id})
        instance = await self.env.PIPELINE.get(parts[1])
        if parts[0] == "approve":
            await instance.send_event(type="approve", payload=await request.json())
        return Response.json(await instance.status())
"""

CONFIG = {
    "name": "pipeline",
    "main": "src/entry.py",
    "workflows": [{"name": "pipeline", "binding": "PIPELINE", "class_name": "Pipeline"}],
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with one workflow binding."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "entry.py").write_text(ENTRY)
    (folder / "wrangler.jsonc").write_text("// a workflow\n" + json.dumps(CONFIG))
    return folder


async def _fetch(loaded: Any, rt: Runtime, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    response = await loaded.fetch(Request(f"http://x{path}", method=method, body=data), rt.env)
    return await response.json()


async def test_a_bound_workflow_runs_and_survives_a_restart(
    project: Path, tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """A project's workflow instance runs in an object of its own, sleeps across a runtime
    restart, then takes its event through the binding and completes."""
    loaded = load_project(project)
    data = tmp_path / "data"
    async with make_runtime(path=data, bindings=loaded.bindings) as rt:
        assert await _fetch(loaded, rt, "POST", "/start/order-7", {"items": [1, 2, 3]}) == {
            "id": "order-7"
        }
        await clock.advance(0)
        status = await _fetch(loaded, rt, "GET", "/status/order-7")
        assert status == {"status": "waiting", "error": None, "output": None}
    assert [file.name for file in (data / "PIPELINE").iterdir() if file.suffix == ".sqlite3"]
    async with make_runtime(path=data, bindings=loaded.bindings) as rt:
        await clock.advance(2 * 86_400_000)
        await _fetch(loaded, rt, "POST", "/approve/order-7", {"ok": True, "by": "ann"})
        await clock.advance(0)
        assert await _fetch(loaded, rt, "GET", "/status/order-7") == {
            "status": "complete",
            "error": None,
            "output": {"total": 3, "by": "ann", "id": "order-7"},
        }


async def test_the_binding_api_matches_cloudflare(
    project: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """`create`, `create_batch`, `get` and the instance calls behave as Cloudflare's."""
    loaded = load_project(project)
    async with make_runtime(bindings=loaded.bindings) as rt:
        binding = rt.env.PIPELINE
        first = await binding.create({"id": "a", "params": {"items": []}})
        with pytest.raises(WorkflowError, match='already has an instance "a"'):
            await binding.create(id="a", params={"items": []})
        with pytest.raises(WorkflowError, match='has no instance "missing"'):
            await binding.get("missing")
        batch = await binding.createBatch(
            [{"id": "a", "params": {"items": [9]}}, {"id": "b", "params": {"items": [1]}}]
        )
        assert [instance.id for instance in batch] == ["a", "b"]
        await clock.advance(0)
        second = await binding.get("b")
        await second.pause()
        assert (await second.status())["status"] == "paused"
        await second.resume()
        await clock.advance(2 * 86_400_000)
        await second.sendEvent({"type": "approve", "payload": {"ok": False, "by": "bob"}})
        await clock.advance(0)
        refused = await second.status()
        assert refused.status == "errored"
        assert refused.error == {"name": "NonRetryableError", "message": "refused by bob"}
        await first.terminate()
        assert (await first.status()).status == "terminated"
        await first.restart()
        await clock.advance(0)
        assert (await first.status()).status == "waiting"


def test_a_workflow_binding_needs_its_class(project: Path) -> None:
    """A `workflows` entry naming no class of the entry module is a clear project error."""
    config = dict(CONFIG, workflows=[{"name": "x", "binding": "X", "class_name": "Missing"}])
    (project / "wrangler.jsonc").write_text(json.dumps(config))
    with pytest.raises(ProjectError, match="no WorkflowEntrypoint class 'Missing'"):
        load_project(project)


async def test_the_driver_reaches_instances_through_a_binding(
    project: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """`WorkflowDriver` runs a bound instance to its sleep, sends the event it will wait
    for, and runs it to its end."""
    from durability.testing import WorkflowDriver

    loaded = load_project(project)
    async with make_runtime(bindings=loaded.bindings) as rt:
        driver = WorkflowDriver(rt, clock)
        await rt.env.PIPELINE.create(id="p1", params={"items": [1]})
        assert (await driver.run_until(rt.env.PIPELINE, "p1", ["waiting"])).status == "waiting"
        await driver.send_event(rt.env.PIPELINE, "p1", "approve", {"ok": True, "by": "cy"})
        done = await driver.run_until(rt.env.PIPELINE, "p1")
        assert done.output == {"total": 1, "by": "cy", "id": "p1"}
