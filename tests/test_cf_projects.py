"""The test projects of tests/cf_projects, served by `durability serve`, answer every
request as a real workerd did (its answers recorded in each project's expected.json by
`scripts/cf-diff --record`): the table of Cloudflare behaviours the runtime reproduces.

Projects of HTTP requests only are served in-process on a virtual clock; projects with
WebSocket steps by a real `durability serve` process, to a real WebSocket client."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from _cf_replay import (
    PROJECTS,
    SOCKET_ACTIONS,
    Answer,
    answer,
    differences,
    expected,
    header_pairs,
    project_names,
    replay_recording,
    steps,
)
from _served import free_port, start, stop
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


def _talks_websocket(name: str) -> bool:
    return any(key in step for step in steps(PROJECTS / name) for key in SOCKET_ACTIONS)


HTTP_ONLY = [name for name in project_names() if not _talks_websocket(name)]

DROPS_OPERATIONS = pytest.mark.filterwarnings(
    "ignore:coroutine .* was never awaited:RuntimeWarning"
)
"""kv_api leaves storage operations unawaited on purpose (they act all the same): each
gets Python's warning, as workerd prints it under workers-runtime-sdk."""
WITH_SOCKETS = [name for name in project_names() if _talks_websocket(name)]


@pytest.mark.parametrize("name", WITH_SOCKETS)
def test_project_answers_over_websockets_as_workerd_did(name: str, tmp_path: Path) -> None:
    """A real `durability serve` gives every request and WebSocket exchange of the
    project workerd's answer (handshakes, frames, close codes), across a restart."""
    project = PROJECTS / name
    port = free_port()
    servers = [start(project, tmp_path / "data", port)]

    def restart() -> None:
        stop(servers.pop())
        servers.append(start(project, tmp_path / "data", port))

    try:
        problems = replay_recording(project, "runtime", lambda: f"http://127.0.0.1:{port}", restart)
    finally:
        stop(servers.pop())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=DROPS_OPERATIONS if name == "kv_api" else ()) for name in HTTP_ONLY],
)
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
