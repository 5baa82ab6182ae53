"""Calls to methods that cannot suspend run without a task: order, context, outcome."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import DurableObject, Runtime


class Recorder(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS marks (n INTEGER PRIMARY KEY)")
        self.log: list[str] = []

    async def mark(self, label: str) -> list[str]:
        self.log.append(label)
        return list(self.log)

    async def slow_mark(self, label: str) -> None:
        self.log.append(f"{label} start")
        await asyncio.sleep(0)
        self.log.append(f"{label} end")

    def plain_mark(self, label: str) -> list[str]:
        self.log.append(label)
        return list(self.log)

    async def add(self, n: int) -> int:
        self.ctx.storage.sql.exec("INSERT INTO marks VALUES (?)", n)
        return n

    async def marks(self) -> list[int]:
        return [row["n"] for row in self.ctx.storage.sql.exec("SELECT n FROM marks ORDER BY n")]

    async def add_via_other_then_lose(self, n: int) -> str:
        await self.env.R.get_by_name("other").add(n)
        self.ctx.storage.sql.exec("INSERT INTO marks VALUES (?)", n)
        try:
            self.ctx.storage.sql.exec("INSERT OR ROLLBACK INTO marks VALUES (?)", n)
        except sqlite3.IntegrityError:
            return "lost"
        return "kept"

    async def shadow_mark(self) -> None:
        async def awaiting(label: str) -> list[str]:
            self.log.append(f"shadowed {label} start")
            await asyncio.sleep(0)
            self.log.append(f"shadowed {label} end")
            return list(self.log)

        self.mark = awaiting  # type: ignore[method-assign]

    async def with_timeout(self) -> str:
        async with asyncio.timeout(5):
            await asyncio.sleep(0)
        return "done"

    @classmethod
    def kind(cls) -> str:
        return cls.__name__


async def test_a_call_waits_behind_deliveries_already_queued(make_runtime: MakeRuntime) -> None:
    """A call that cannot suspend, made after a queued one, runs after it starts, in order."""
    async with make_runtime(bindings={"R": Recorder}) as rt:
        stub = rt.env.R.get_by_name("r")
        await stub.mark("ready")
        await asyncio.gather(stub.slow_mark("a"), stub.mark("b"), stub.plain_mark("c"))
        assert await stub.mark("d") == ["ready", "a start", "b", "c", "a end", "d"]


async def test_an_inner_call_does_not_take_over_the_callers_output_gate(
    make_runtime: MakeRuntime,
) -> None:
    """A call made from inside another object's call keeps that call's writes gated."""
    async with make_runtime(bindings={"R": Recorder}) as rt:
        stub = rt.env.R.get_by_name("r")
        with pytest.raises(sqlite3.IntegrityError):
            await stub.add_via_other_then_lose(1)
        assert await stub.marks() == []
        assert await rt.env.R.get_by_name("other").marks() == [1]


async def test_a_shadowed_method_that_awaits_still_completes(make_runtime: MakeRuntime) -> None:
    """A method shadowed by an awaiting instance attribute runs to its end, in call order."""
    async with make_runtime(bindings={"R": Recorder}) as rt:
        stub = rt.env.R.get_by_name("r")
        await stub.shadow_mark()
        shadowed, plain = await asyncio.gather(stub.mark("x"), stub.plain_mark("y"))
        assert shadowed == ["shadowed x start", "y", "shadowed x end"]
        assert plain == ["shadowed x start", "y"]
        assert await stub.with_timeout() == "done"


async def test_a_cancelled_caller_does_not_undo_the_call(make_runtime: MakeRuntime) -> None:
    """Cancelling a caller whose call already ran leaves its write in place."""
    async with make_runtime(bindings={"R": Recorder}) as rt:
        stub = rt.env.R.get_by_name("r")
        await stub.marks()
        caller = asyncio.ensure_future(stub.add(7))
        await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert await stub.marks() == [7]


async def test_only_methods_without_awaits_are_direct() -> None:
    """The namespace marks as direct exactly the plain functions whose code never awaits."""
    async with Runtime(bindings={"R": Recorder}) as rt:
        namespace = rt.env.R
        assert namespace._direct_code("mark") is Recorder.mark.__code__
        assert namespace._direct_code("plain_mark") is Recorder.plain_mark.__code__
        assert namespace._direct_code("slow_mark") is None
        assert namespace._direct_code("with_timeout") is None
        assert namespace._direct_code("add_via_other_then_lose") is None
        assert namespace._direct_code("kind") is None
        assert await rt.env.R.get_by_name("r").kind() == "Recorder"
