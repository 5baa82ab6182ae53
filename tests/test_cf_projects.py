"""The test projects of tests/cf_projects, served by `durability serve`, answer every
request as a real workerd did (its answers recorded in each project's expected.json by
`scripts/cf-diff --record`): the table of Cloudflare behaviours the runtime reproduces."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from _cf_replay import (
    PROJECTS,
    Answer,
    answer,
    differences,
    expected,
    header_pairs,
    project_names,
    steps,
)
from durability.runtime import Runtime
from durability.runtime.server import WorkerApp, WorkerModule, load_worker
from durability.testing import VirtualClock

STEP_MS = 10
"""While a request waits on time, the virtual clock moves in steps this long."""


class Host:
    """A project served in-process on a virtual clock, restartable on the same storage."""

    def __init__(self, worker: WorkerModule, data: Path, clock: VirtualClock) -> None:
        self.worker, self.data, self.clock = worker, data, clock
        self.app: WorkerApp | None = None

    async def start(self) -> None:
        runtime = Runtime(path=self.data, bindings=self.worker.bindings, clock=self.clock)
        await runtime.start()
        self.app = WorkerApp(self.worker, runtime)

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.stop()
            self.app = None

    async def ask(self, step: dict[str, Any]) -> Answer:
        transport = httpx.ASGITransport(app=self.app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            body = step.get("body")
            pending = asyncio.ensure_future(
                client.request(
                    step.get("method", "GET"),
                    step["path"],
                    headers=header_pairs(step),
                    content=None if body is None else body.encode("utf-8"),
                )
            )
            await self.clock.run_until_idle()
            while not pending.done():
                await self.clock.advance(STEP_MS)
            response = pending.result()
        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
        return answer(step, response.status_code, pairs, response.content)


@pytest.mark.parametrize("name", project_names())
async def test_project_answers_as_workerd_did(name: str, tmp_path: Path) -> None:
    """Every request of the project gets workerd's status, headers and body, across a
    restart and with time passing (on a virtual clock here)."""
    project = PROJECTS / name
    recorded = expected(project)
    assert recorded is not None, f"{name} has no expected.json: run scripts/cf-diff --record"
    clock = VirtualClock()
    host = Host(load_worker(str(project)), tmp_path / "data", clock)
    await host.start()
    answers = []
    try:
        for step in steps(project):
            if step.get("restart"):
                await host.stop()
                await host.start()
            elif "sleep_ms" in step:
                await clock.advance(step["sleep_ms"])
            else:
                answers.append(await host.ask(step))
    finally:
        await host.stop()
    assert len(answers) == len(recorded)
    problems = [
        f"{got['name']}: {line}"
        for want, got in zip(recorded, answers, strict=True)
        for line in differences(want, got)
    ]
    assert not problems, "\n".join(problems)
