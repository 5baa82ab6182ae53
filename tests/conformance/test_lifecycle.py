"""Instance lifecycle: evict, crash, restart, fencing, hibernation, wait_until, input gate."""

from __future__ import annotations

import asyncio
import resource
import types
from collections.abc import Coroutine, Generator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import START_MS, Holder, LiveObject, MakeRuntime
from durability import now_ms
from durability.runtime import AlarmInvocationInfo, DurableObject, ObjectEvictedError, Runtime
from durability.testing import VirtualClock


class World:
    """Shared between the test and its objects: the runtime, events and observations."""

    def __init__(self) -> None:
        self.rt: Any = None
        self.built = 0
        self.contexts: list[Any] = []
        self.release = asyncio.Event()
        self.log: list[Any] = []


class Keeper(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        world: World = env.WORLD
        world.built += 1
        world.contexts.append(ctx)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (v TEXT)")

    def _world(self) -> World:
        world: World = self.env.WORLD
        return world

    async def write(self, value: str) -> None:
        self.ctx.storage.sql.exec("INSERT INTO t VALUES (?)", value)

    async def values(self) -> list[str]:
        return [row["v"] for row in self.ctx.storage.sql.exec("SELECT v FROM t")]

    async def write_then_crash(self, value: str) -> None:
        self.ctx.storage.sql.exec("INSERT INTO t VALUES (?)", value)
        await self._world().rt.crash(self.ctx.id)

    async def write_then_evict(self, value: str) -> None:
        self.ctx.storage.sql.exec("INSERT INTO t VALUES (?)", value)
        await self._world().rt.evict(self.ctx.id)

    async def wait_forever(self) -> None:
        await asyncio.Event().wait()

    async def background(self) -> None:
        async def work() -> None:
            try:
                await asyncio.sleep(3_600)
            except asyncio.CancelledError:
                self._world().log.append("background cancelled")
                raise

        self.ctx.wait_until(work())

    async def later_write(self, value: str, delay_s: float) -> None:
        async def work() -> None:
            await asyncio.sleep(delay_s)
            self.ctx.storage.sql.exec("INSERT INTO t VALUES (?)", value)

        self.ctx.wait_until(asyncio.ensure_future(work()))

    async def blocking(self) -> None:
        async def hold() -> None:
            self._world().log.append("block start")
            await self._world().release.wait()
            self._world().log.append("block end")

        await self.ctx.block_concurrency_while(hold)

    async def plain_block(self) -> list[int]:
        async def four() -> int:
            return 4

        return [
            await self.ctx.block_concurrency_while(lambda: 3),
            await self.ctx.block_concurrency_while(four),
        ]

    async def mark(self, label: str) -> None:
        self._world().log.append(label)

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self, info: AlarmInvocationInfo) -> None:
        world = self._world()
        world.log.append(("alarm", now_ms(), info.retry_count))
        if info.retry_count == 0 and "hang first alarm" in world.log:
            await asyncio.Event().wait()


async def test_evict_keeps_committed_data_and_rebuilds(make_runtime: MakeRuntime) -> None:
    """After evict, committed data stays and the next call builds a new instance."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        stub = rt.env.K.get_by_name("k")
        await stub.write("a")
        await rt.evict(stub)
        assert await stub.values() == ["a"]
        assert world.built == 2
        await rt.evict(stub.id)
        await rt.evict(stub.id)
        assert world.built == 2


async def test_old_ctx_is_fenced(make_runtime: MakeRuntime) -> None:
    """Every storage call through an evicted instance's ctx raises ObjectEvictedError."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        stub = rt.env.K.get_by_name("k")
        await stub.write("a")
        await rt.evict(stub)
        old = world.contexts[0]
        with pytest.raises(ObjectEvictedError, match="evicted"):
            old.storage.sql.exec("INSERT INTO t VALUES ('zombie')")
        with pytest.raises(ObjectEvictedError):
            await old.storage.put("k", 1)
        with pytest.raises(ObjectEvictedError):
            await old.storage.set_alarm(now_ms())
        with pytest.raises(ObjectEvictedError):
            old.storage.transaction_sync(lambda: None)
        with pytest.raises(ObjectEvictedError):
            old.wait_until(asyncio.sleep(0))
        assert await stub.values() == ["a"]


async def test_crash_loses_uncommitted_writes(make_runtime: MakeRuntime) -> None:
    """crash drops writes not yet committed; the interrupted caller gets ObjectEvictedError."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        world.rt = rt
        stub = rt.env.K.get_by_name("k")
        await stub.write("kept")
        with pytest.raises(ObjectEvictedError):
            await stub.write_then_crash("lost")
        assert await stub.values() == ["kept"]


async def test_evict_commits_finished_turns(make_runtime: MakeRuntime) -> None:
    """evict keeps the writes of turns already run, even if their commit was pending."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        world.rt = rt
        stub = rt.env.K.get_by_name("k")
        with pytest.raises(ObjectEvictedError):
            await stub.write_then_evict("kept")
        assert await stub.values() == ["kept"]


async def test_evict_cancels_calls_and_background_work(make_runtime: MakeRuntime) -> None:
    """In-flight calls fail with ObjectEvictedError and wait_until work is cancelled."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        stub = rt.env.K.get_by_name("k")
        await stub.background()
        pending = asyncio.ensure_future(stub.wait_forever())
        await asyncio.sleep(0)
        await rt.evict(stub)
        with pytest.raises(ObjectEvictedError):
            await pending
        assert world.log == ["background cancelled"]


async def test_wait_until_work_runs_after_the_call(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Work passed to wait_until keeps running after the call returned."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        stub = rt.env.K.get_by_name("k")
        await stub.later_write("late", 5)
        assert await stub.values() == []
        await clock.advance(5_000)
        assert await stub.values() == ["late"]
        with pytest.raises(TypeError):
            world.contexts[0].wait_until(42)


async def test_block_concurrency_while_holds_other_calls(make_runtime: MakeRuntime) -> None:
    """No other call is delivered while block_concurrency_while runs; they follow in order."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        stub = rt.env.K.get_by_name("k")
        blocker = asyncio.ensure_future(stub.blocking())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        first = asyncio.ensure_future(stub.mark("first"))
        second = asyncio.ensure_future(stub.mark("second"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert world.log == ["block start"]
        world.release.set()
        await asyncio.gather(blocker, first, second)
        assert world.log == ["block start", "block end", "first", "second"]


async def test_block_concurrency_while_takes_a_plain_function(
    make_runtime: MakeRuntime,
) -> None:
    """A plain function's result is returned as is; a coroutine's is awaited."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        assert await rt.env.K.get_by_name("k").plain_block() == [3, 4]


async def test_idle_instances_hibernate(make_runtime: MakeRuntime, clock: VirtualClock) -> None:
    """An instance idle for idle_evict_ms is evicted; its data and alarm stay."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}, idle_evict_ms=60_000) as rt:
        stub = rt.env.K.get_by_name("k")
        await stub.write("a")
        await stub.arm(now_ms() + 3_600_000)
        await clock.advance(59_000)
        await stub.mark("touch")
        await clock.advance(59_000)
        assert world.built == 1
        await clock.advance(1_000)
        with pytest.raises(ObjectEvictedError):
            world.contexts[0].storage.sql.exec("SELECT 1")
        assert await stub.values() == ["a"]
        assert world.built == 2
        await clock.advance(3_600_000)
        assert [entry[0] for entry in world.log if isinstance(entry, tuple)] == ["alarm"]


async def test_hibernation_can_be_disabled(make_runtime: MakeRuntime, clock: VirtualClock) -> None:
    """idle_evict_ms=None keeps instances until evicted explicitly."""
    world = World()
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}, idle_evict_ms=None) as rt:
        await rt.env.K.get_by_name("k").write("a")
        await clock.advance(86_400_000)
        await rt.env.K.get_by_name("k").write("b")
        assert world.built == 1


async def test_alarm_interrupted_by_eviction_is_retried(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """An alarm() cut off by eviction runs again as a retry on a new instance."""
    world = World()
    world.log.append("hang first alarm")
    async with make_runtime(bindings={"K": Keeper, "WORLD": world}) as rt:
        stub = rt.env.K.get_by_name("k")
        start = now_ms()
        await stub.arm(start)
        await clock.run_until_idle()
        await rt.crash(stub)
        await clock.advance(2_000)
        assert world.log[1:] == [("alarm", start, 0), ("alarm", start + 2_000, 1)]
        assert world.built == 2


class Stubborn(DurableObject):
    async def ignore_cancellation(self) -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                continue


async def test_evict_does_not_hang_on_work_ignoring_cancellation(
    make_runtime: MakeRuntime,
) -> None:
    """A call that swallows cancellation is left behind fenced; evict still returns."""
    async with make_runtime(bindings={"S": Stubborn}) as rt:
        stub = rt.env.S.get_by_name("s")
        pending = asyncio.ensure_future(stub.ignore_cancellation())
        await asyncio.sleep(0)
        await rt.evict(stub)
        with pytest.raises(ObjectEvictedError):
            await pending


class Flaky(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        attempts: list[int] = env.ATTEMPTS
        attempts.append(1)
        if len(attempts) == 1:
            raise LookupError("first construction fails")

    async def ping(self) -> str:
        return "pong"


async def test_failed_construction_is_retried_on_next_call(make_runtime: MakeRuntime) -> None:
    """A constructor that raises fails that call; the next call constructs again."""
    attempts: list[int] = []
    async with make_runtime(bindings={"F": Flaky, "ATTEMPTS": attempts}) as rt:
        stub = rt.env.F.get_by_name("f")
        with pytest.raises(LookupError):
            await stub.ping()
        assert await stub.ping() == "pong"
        assert len(attempts) == 2


async def test_close_fails_calls_in_flight(make_runtime: MakeRuntime) -> None:
    """Closing the runtime ends calls still running with ObjectEvictedError."""
    world = World()
    rt = make_runtime(bindings={"K": Keeper, "WORLD": world})
    await rt.start()
    pending = asyncio.ensure_future(rt.env.K.get_by_name("k").wait_forever())
    await asyncio.sleep(0)
    await rt.close()
    with pytest.raises(ObjectEvictedError):
        await pending


class Tally(DurableObject):
    """Counts its constructions in `env.BUILT` and can hold a call open."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        env.BUILT.append(ctx.id.name)

    async def touch(self) -> str:
        return str(self.ctx.id.name)

    async def hold(self, gate_name: str) -> str:
        await self.env.GATES[gate_name].wait()
        return "released"


async def test_live_objects_are_capped_least_recently_used_first(
    make_runtime: MakeRuntime,
) -> None:
    """Past max_live_objects the least recently used idle instance is evicted, never a busy one."""
    built: list[str] = []
    gate = asyncio.Event()
    rt = make_runtime(
        bindings={"T": Tally, "BUILT": built, "GATES": {"g": gate}}, max_live_objects=3
    )
    async with rt:
        ns = rt.env.T
        for name in ("a", "b", "c"):
            await ns.get_by_name(name).touch()
        await ns.get_by_name("a").touch()
        held = asyncio.ensure_future(ns.get_by_name("b").hold("g"))
        await asyncio.sleep(0)
        await ns.get_by_name("d").touch()
        await ns.get_by_name("e").touch()
        assert built == ["a", "b", "c", "d", "e"]
        await ns.get_by_name("c").touch()
        await ns.get_by_name("b").touch()
        assert built == ["a", "b", "c", "d", "e", "c"]
        gate.set()
        assert await held == "released"
        for name in ("f", "g", "h", "i"):
            await ns.get_by_name(name).touch()
        await ns.get_by_name("c").touch()
        assert built[-1] == "c"
        assert len(built) == 11


def test_live_and_open_caps_are_checked_and_open_files_default_from_the_fd_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both caps must be positive ints; open files by default leave a quarter of fds free."""
    for option in ("max_live_objects", "max_open_databases"):
        with pytest.raises(ValueError, match=option):
            Runtime(**{option: 0})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=option):
            Runtime(**{option: "9"})  # type: ignore[arg-type]
    assert Runtime(max_live_objects=7).max_live_objects == 7
    assert Runtime(max_open_databases=5).max_open_databases == 5
    assert Runtime().max_live_objects == 10_000
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1_024, 4_096))
    assert Runtime().max_open_databases == 192  # 3/4 of 1,024, four descriptors per file
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY, 0))
    assert Runtime().max_open_databases == 1_000


async def test_evict_keeps_committed_data_and_alarm(live: LiveObject) -> None:
    """After `evict` (by stub or id) the next call builds an instance that sees data and alarm."""
    old = live.ctx
    await old.storage.put("k", "v")
    await old.storage.set_alarm(START_MS + 30_000)
    await live.runtime.evict(live.stub)
    await live.stub.now()
    assert live.ctx is not old
    await live.runtime.evict(live.stub.id)
    await live.stub.now()
    assert live.ctx is not old
    assert await live.ctx.storage.get("k") == "v"
    assert await live.ctx.storage.get_alarm() == START_MS + 30_000


async def test_runtime_on_a_path_finds_objects_data_and_due_alarms(tmp_path: Path) -> None:
    """A new Runtime on the same path finds the data; an alarm that came due fires at start."""
    probe = SimpleNamespace(ctx=None, alarms=[])
    bindings = {"OBJ": Holder, "PROBE": probe}
    clock = VirtualClock()
    async with Runtime(path=tmp_path, bindings=bindings, clock=clock) as runtime:
        await runtime.env.OBJ.get_by_name("kept").now()
        await probe.ctx.storage.put("k", "v")
        await probe.ctx.storage.set_alarm(START_MS + 10_000)
    later = VirtualClock(start_ms=START_MS + 60_000)
    async with Runtime(path=tmp_path, bindings=bindings, clock=later) as runtime:
        await later.run_until_idle()
        assert [at for at, _ in probe.alarms] == [START_MS + 60_000]
        await runtime.env.OBJ.get_by_name("kept").now()
        assert await probe.ctx.storage.get("k") == "v"
        assert await probe.ctx.storage.get_alarm() is None


def start_eagerly(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> asyncio.Task[Any]:
    """A task factory that runs a task's first step inside `create_task`, as Python 3.12's
    `asyncio.eager_task_factory` does (the stand-in where Python has none)."""
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return asyncio.Task(_returns(stop.value), loop=loop, **options)
    return asyncio.Task(_resumes(coro, first), loop=loop, **options)


async def _returns(value: Any) -> Any:
    return value


async def _resumes(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await _steps(coro, first)


@types.coroutine
def _steps(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Go on with `coro` from where its first step left it, handing the task what it yields."""
    while True:
        try:
            try:
                sent = yield yielded
            except BaseException as error:
                yielded = coro.throw(error)
            else:
                yielded = coro.send(sent)
        except StopIteration as stop:
            return stop.value


async def test_start_refuses_a_loop_that_starts_tasks_eagerly(tmp_path: Path) -> None:
    """A loop whose task factory runs each task inside `create_task` is refused at start,
    with the rule named, before the path is taken: the same runtime starts once the
    factory is gone."""
    loop = asyncio.get_running_loop()
    probe = SimpleNamespace(ctx=None, alarms=[])
    runtime = Runtime(path=tmp_path, bindings={"OBJ": Holder, "PROBE": probe}, clock=VirtualClock())
    loop.set_task_factory(getattr(asyncio, "eager_task_factory", start_eagerly))
    try:
        with pytest.raises(RuntimeError, match="task factory starts tasks eagerly"):
            await runtime.start()
    finally:
        loop.set_task_factory(None)
    async with runtime:
        assert await runtime.env.OBJ.get_by_name("a").echo(1) == 1


class Napper(DurableObject):
    async def nap(self) -> str:
        """Suspends once, so the call runs as a task of its own."""
        await asyncio.sleep(0)
        return "rested"


async def test_a_task_factory_that_starts_tasks_later_is_used(tmp_path: Path) -> None:
    """A task factory whose tasks start on a later turn is accepted, and the runtime's
    tasks (a call that suspends among them) are made by it."""
    loop = asyncio.get_running_loop()
    made: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> asyncio.Task[Any]:
        made.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **options)

    loop.set_task_factory(factory)
    try:
        async with Runtime(path=tmp_path, bindings={"N": Napper}, clock=VirtualClock()) as rt:
            assert await rt.env.N.get_by_name("a").nap() == "rested"
    finally:
        loop.set_task_factory(None)
    assert "CallDelivery._run_call" in made
