"""The image jobs example on a virtual clock, with a fake resizer that loses answers."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import Request, Runtime
from durability.runtime.server import WorkerModule, load_worker
from durability.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "image_jobs"
MINUTE_MS = 60_000


@dataclass
class FakeResizer:
    """Bound as RESIZER: one image per idempotency key, with scripted misbehaviour.

    `script` holds what each next call does, in order: "ok", "503", "lost" (the image
    is made, then the answer is lost as a ConnectionError) or "hang" (no answer for two
    minutes). Calls past the script are "ok". `keys` records every key it was asked for.
    """

    script: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)

    def getByName(self, name: str) -> FakeResizer:
        return self

    async def resize(
        self, idempotency_key: str, image_id: str, width: int, fail_first: int = 0
    ) -> dict[str, Any]:
        self.keys.append(idempotency_key)
        step = self.script.pop(0) if self.script else "ok"
        if step == "503":
            return {"status": 503, "error": "busy"}
        if step == "hang":
            await asyncio.sleep(120)
        image = self.images.setdefault(idempotency_key, f"resized/{width}/{image_id}")
        if step == "lost":
            raise ConnectionError("the answer was lost on the way back")
        return {"status": 200, "image": image}


@dataclass
class Jobs:
    """The example served by a file-backed runtime on a virtual clock."""

    worker: WorkerModule
    rt: Runtime
    clock: VirtualClock

    async def request(self, method: str, path: str) -> tuple[int, Any]:
        response = await self.worker.fetch(
            Request(f"http://jobs{path}", method=method), self.rt.env
        )
        raw = await response.text()
        is_json = response.headers.get("content-type") == "application/json"
        return response.status, json.loads(raw) if is_json else raw

    async def result(self, image: str, width: int) -> Any:
        status, body = await self.request("GET", f"/{image}/result?width={width}")
        assert status == 200
        return body


Serve = Callable[[FakeResizer], AbstractAsyncContextManager[Jobs]]


@pytest.fixture
def serve(tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock) -> Serve:
    """Serve the example on one data directory; each use is a fresh runtime (a restart)."""
    worker = load_worker(str(EXAMPLE))

    @asynccontextmanager
    async def running(resizer: FakeResizer) -> AsyncIterator[Jobs]:
        bindings = {**worker.bindings, "RESIZER": resizer}
        async with make_runtime(path=str(tmp_path / "db"), bindings=bindings) as rt:
            yield Jobs(worker, rt, clock)

    return running


async def test_a_lost_answer_is_retried_under_the_same_key(serve: Serve) -> None:
    """The resizer made the image but its answer was lost: the retry carries the same
    idempotency key and gets the same image, so one image is made."""
    resizer = FakeResizer(script=["lost"])
    async with serve(resizer) as jobs:
        status, job = await jobs.request("POST", "/cat.jpg/resize?width=300")
        await jobs.clock.advance(MINUTE_MS)
        done = await jobs.result("cat.jpg", 300)
    assert (status, job) == (202, {"job": "resize:cat.jpg:300"})
    assert (done["status"], done["attempt"], done["image"]) == (
        "completed",
        2,
        "resized/300/cat.jpg",
    )
    assert len(resizer.keys) == 2
    assert len(set(resizer.keys)) == 1
    assert len(resizer.images) == 1


async def test_asking_for_the_same_size_again_registers_nothing(serve: Serve) -> None:
    """A second POST for the same image and width is the same job: the resizer is asked once."""
    resizer = FakeResizer()
    async with serve(resizer) as jobs:
        first = await jobs.request("POST", "/cat.jpg/resize?width=300")
        await jobs.clock.advance(MINUTE_MS)
        again = await jobs.request("POST", "/cat.jpg/resize?width=300")
        await jobs.clock.advance(MINUTE_MS)
    assert first == again
    assert len(resizer.keys) == 1


async def test_an_attempt_that_hangs_times_out_and_is_retried(serve: Serve) -> None:
    """An attempt over 60 s is abandoned and the job is tried again."""
    resizer = FakeResizer(script=["hang"])
    async with serve(resizer) as jobs:
        await jobs.request("POST", "/cat.jpg/resize?width=300")
        await jobs.clock.advance(MINUTE_MS + 1)
        waiting = await jobs.result("cat.jpg", 300)
        await jobs.clock.advance(MINUTE_MS)
        done = await jobs.result("cat.jpg", 300)
    assert waiting["status"] == "pending"
    assert "60000" in waiting["last_error"]
    assert (done["status"], done["attempt"]) == ("completed", 2)


async def test_input_errors_fail_at_once_and_unavailability_uses_all_attempts(
    serve: Serve,
) -> None:
    """A bad width never reaches the resizer, a 4xx is not retried, and 503s are retried
    until the fifth attempt fails."""
    resizer = FakeResizer(script=["503"] * 5)
    async with serve(resizer) as jobs:
        await jobs.request("POST", "/cat.jpg/resize?width=5000")
        await jobs.request("POST", "/cat.jpg/resize?width=wide")
        await jobs.request("POST", "/cat.jpg/resize?width=300")
        await jobs.clock.advance(30 * MINUTE_MS)
        too_wide = await jobs.result("cat.jpg", 5000)
        not_a_number = await jobs.result("cat.jpg", "wide")  # type: ignore[arg-type]
        unavailable = await jobs.result("cat.jpg", 300)
    assert [(r["status"], r["attempt"]) for r in (too_wide, not_a_number)] == [("failed", 1)] * 2
    assert too_wide["error"] == {
        "name": "InvalidWidth",
        "message": "width must be an integer from 1 to 4096, got 5000",
    }
    assert not_a_number["error"]["message"].endswith("got 'wide'")
    assert (unavailable["status"], unavailable["attempt"]) == ("failed", 5)
    assert unavailable["error"]["name"] == "ResizerUnavailable"
    assert len(resizer.keys) == 5


async def test_a_pending_job_survives_a_restart(serve: Serve) -> None:
    """A job registered before a restart (its attempt failed) is finished by the next runtime."""
    resizer = FakeResizer(script=["503"])
    async with serve(resizer) as jobs:
        await jobs.request("POST", "/cat.jpg/resize?width=300")
        await jobs.clock.run_until_idle()
        before = await jobs.result("cat.jpg", 300)
    async with serve(resizer) as jobs:
        await jobs.clock.advance(MINUTE_MS)
        after = await jobs.result("cat.jpg", 300)
    assert (before["status"], before["attempt"]) == ("pending", 1)
    assert (after["status"], after["attempt"]) == ("completed", 2)


async def test_bad_requests(serve: Serve) -> None:
    """A missing width answers 400; unknown routes answer 404 with the usage."""
    async with serve(FakeResizer()) as jobs:
        missing = await jobs.request("POST", "/cat.jpg/resize")
        unknown = await jobs.request("DELETE", "/cat.jpg")
    assert missing == (400, "width is required")
    assert unknown[0] == 404
    assert "POST /IMAGE/resize" in unknown[1]


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("width=300&fail=abc", "fail must be a whole number from 0 to 100\n"),
        ("width=300&fail=-1", "fail must be a whole number from 0 to 100\n"),
        ("width=300&fail=101", "fail must be a whole number from 0 to 100\n"),
        ("width=300&fail=", "fail must be a whole number from 0 to 100\n"),
        ("width=", "width is required"),
    ],
)
async def test_bad_parameters_answer_400_and_register_nothing(
    serve: Serve, query: str, answer: str
) -> None:
    """A bad `fail` or an empty `width` answers 400 naming it; no job is registered."""
    resizer = FakeResizer()
    async with serve(resizer) as jobs:
        assert await jobs.request("POST", f"/cat.jpg/resize?{query}") == (400, answer)
        await jobs.clock.advance(MINUTE_MS)
        assert (await jobs.result("cat.jpg", 300))["status"] == "not_found"
    assert resizer.keys == []


async def test_a_huge_width_fails_the_job_as_an_input_error(serve: Serve) -> None:
    """A width beyond any integer JSON keeps is still the job's input error, never a 500."""
    async with serve(FakeResizer()) as jobs:
        status, body = await jobs.request("POST", "/cat.jpg/resize?width=99999999999999999999")
        await jobs.clock.advance(MINUTE_MS)
        result = await jobs.result("cat.jpg", 99999999999999999999)
    assert (status, body) == (202, {"job": "resize:cat.jpg:99999999999999999999"})
    assert result["status"] == "failed"


async def test_a_wrong_method_answers_405_with_the_allowed_one(serve: Serve) -> None:
    """A known route asked with the wrong method answers 405 and names the right one."""
    async with serve(FakeResizer()) as jobs:
        for method, path, allowed in [
            ("GET", "/cat.jpg/resize?width=3", "POST"),
            ("POST", "/cat.jpg/result?width=3", "GET"),
            ("POST", "/cat.jpg/upstream", "GET"),
            ("DELETE", "/", "GET"),
        ]:
            response = await jobs.worker.fetch(
                Request(f"http://jobs{path}", method=method), jobs.rt.env
            )
            assert (response.status, response.headers.get("allow")) == (405, allowed), path


def test_the_stand_in_resizer_applies_a_key_once(make_runtime: MakeRuntime) -> None:
    """The example's own Resizer answers a repeated key with the image made before."""
    module = sys.modules[load_worker(str(EXAMPLE)).name]

    async def run() -> list[Any]:
        async with make_runtime(bindings={"RESIZER": module.Resizer}) as rt:
            resizer = rt.env.RESIZER.get_by_name("resizer")
            first = await resizer.resize("k1", "cat.png", 50, 1)
            second = await resizer.resize("k1", "cat.png", 50, 1)
            third = await resizer.resize("k1", "cat.png", 50, 1)
            return [first, second, third, await resizer.requests("cat.png")]

    first, second, third, requests = asyncio.run(run())
    assert first["status"] == 503
    assert second == third == {"status": 200, "image": "resized/50/cat.png"}
    assert requests == [{"width": 50, "calls": 3, "image": "resized/50/cat.png"}]
