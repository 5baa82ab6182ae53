"""The counter and RPC transforms examples refuse bad input: 400 naming it, 405 for a wrong method.

(The other examples pin the same in their own test modules.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import Request, Runtime
from durability.runtime.server import WorkerModule, load_worker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class Served:
    """One example on an in-memory runtime and a virtual clock, asked in process."""

    def __init__(self, worker: WorkerModule, rt: Runtime) -> None:
        self.worker = worker
        self.rt = rt

    async def ask(self, method: str, path: str) -> tuple[int, str, str | None]:
        """`(status, body, allow header)` of one request."""
        response = await self.worker.fetch(Request(f"http://x{path}", method=method), self.rt.env)
        return response.status, await response.text(), response.headers.get("allow")


@pytest.fixture
async def served(
    request: pytest.FixtureRequest, make_runtime: MakeRuntime
) -> AsyncIterator[Served]:
    worker = load_worker(str(EXAMPLES / request.param))
    async with make_runtime(bindings=worker.bindings) as rt:
        yield Served(worker, rt)


@pytest.mark.parametrize("served", ["counter"], indirect=True)
async def test_counter_wrong_methods_answer_405(served: Served) -> None:
    """Each counter route asked with the wrong method answers 405 with its Allow header."""
    for method, path, allowed in [
        ("POST", "/apples", "GET"),
        ("GET", "/apples/increment", "POST"),
        ("GET", "/apples/reset-in/30", "POST"),
        ("DELETE", "/apples/cancel-reset", "POST"),
    ]:
        status, body, allow = await served.ask(method, path)
        assert (status, allow) == (405, allowed), path
        assert body == f"{method} is not allowed here: use {allowed}\n"
    assert (await served.ask("GET", "/apples"))[:2] == (
        200,
        '{"name": "apples", "value": 0, "reset_at_ms": null}',
    )
    assert (await served.ask("GET", "/apples/nope"))[0] == 404


@pytest.mark.parametrize("served", ["counter"], indirect=True)
@pytest.mark.parametrize("seconds", ["abc", "-1", "99999999999999999999999", "1.5"])
async def test_counter_bad_seconds_answer_400_and_arm_nothing(served: Served, seconds: str) -> None:
    """A reset delay that is not 0 to 366 days answers 400 and arms no alarm."""
    status, body, _ = await served.ask("POST", f"/apples/reset-in/{seconds}")
    assert (status, body) == (400, "SECONDS must be a whole number from 0 to 31622400\n")
    assert '"reset_at_ms": null' in (await served.ask("GET", "/apples"))[1]


@pytest.mark.parametrize("served", ["rpc_transforms"], indirect=True)
@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("fail=abc", "fail must be a whole number from 0 to 100\n"),
        ("fail=", "fail must be a whole number from 0 to 100\n"),
        ("delay_ms=-5", "delay_ms must be a whole number from 0 to 60000\n"),
        ("delay_ms=99999999999999999999999", "delay_ms must be a whole number from 0 to 60000\n"),
        ("timeout_ms=0", "timeout_ms must be a whole number from 1 to 60000\n"),
        ("timeout_ms=1e3", "timeout_ms must be a whole number from 1 to 60000\n"),
    ],
)
async def test_rpc_transforms_bad_parameters_answer_400(
    served: Served, query: str, answer: str
) -> None:
    """A bad `fail`, `delay_ms` or `timeout_ms` answers 400 naming it; nothing is counted."""
    assert (await served.ask("POST", f"/c/increment?{query}"))[:2] == (400, answer)
    state: Any = (await served.ask("GET", "/c"))[1]
    assert '"value": 0' in state


@pytest.mark.parametrize("served", ["rpc_transforms"], indirect=True)
async def test_rpc_transforms_wrong_methods_answer_405(served: Served) -> None:
    """`GET /NAME/increment` and `POST /NAME` answer 405 naming the method they take."""
    assert await served.ask("GET", "/c/increment") == (
        405,
        "GET is not allowed here: use POST\n",
        "POST",
    )
    assert (await served.ask("POST", "/c"))[::2] == (405, "GET")
