"""The `workers`, `js` and `pyodide` stand-ins: their names, their Python-valued
behaviour, and the rule that a real module of the same name always wins."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import durability.runtime  # noqa: F401  (installs the stand-ins)
from durability._cloudflare import _ffi
from durability.runtime import DurableObject, Request, Response, Runtime
from durability.runtime._js_errors import JsException
from durability.runtime._js_values import JsDict
from durability.runtime._kv_codec import decode, encode
from durability.runtime._workers import ExecutionContext, serve_worker
from durability.testing import VirtualClock

SDK_NAMES = {
    "Blob", "BlobEnding", "BlobValue", "Body", "Context", "DurableObject", "FetchKwargs",
    "FetchResponse", "File", "FormData", "FormDataValue", "Headers", "JSBody", "Request",
    "RequestInitCfProperties", "Response", "WorkerEntrypoint", "env", "fetch", "handler",
    "import_from_javascript", "patch_env", "python_from_rpc", "python_to_rpc", "waitUntil",
    "wait_until", "WorkflowEntrypoint",
}  # fmt: skip
"""`workers.__all__` of workers-runtime-sdk 1.9.5."""


def test_workers_has_the_sdks_names() -> None:
    """Every public name of workers-runtime-sdk is importable."""
    import workers

    assert set(workers.__all__) == SDK_NAMES
    for name in SDK_NAMES:
        assert getattr(workers, name) is not None, name


@pytest.mark.parametrize("name", ["js", "pyodide"])
def test_a_real_module_wins_over_the_stand_in(tmp_path: Path, name: str) -> None:
    """Where a module named `js` or `pyodide` can be imported, it is used, not the stand-in."""
    (tmp_path / f"{name}.py").write_text("REAL = True\n")
    code = f"import durability.runtime, {name}; print(getattr({name}, 'REAL', False))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "True"


def test_the_adapter_does_not_take_the_stand_ins_for_pyodide() -> None:
    """The Cloudflare adapter sees no Pyodide where only the stand-ins exist."""
    import js
    import pyodide.ffi

    assert (js.__name__, pyodide.ffi.__name__) == ("js", "pyodide.ffi")
    assert _ffi.js() is None
    assert _ffi.ffi() is None


def test_pyodide_ffi_keeps_python_values() -> None:
    """to_js gives its argument back as Python values marked as JavaScript ones (to_py
    undoes it); proxies call until destroyed; jsnull is not None; nothing local is a
    JsProxy."""
    from pyodide.ffi import IN_PYODIDE, JsProxy, create_proxy, jsnull, to_js

    value = {"a": [1, None], "b": (b"x", {2})}
    converted = to_js(value)
    assert converted == {"a": [1, None], "b": [b"x", {2}]}
    assert [type(part).__name__ for part in (converted, converted["a"], *converted["b"])] == [
        "JsObject",
        "JsArray",
        "JsBuffer",
        "JsSet",
    ]
    assert converted.to_py() == {"a": [1, None], "b": [b"x", {2}]}
    assert type(converted.to_py()["a"]) is list
    assert to_js(converted) is converted and to_js("text") == "text"
    proxy = create_proxy(lambda x: x + 1)
    assert proxy(1) == 2
    proxy.destroy()
    with pytest.raises(JsException, match="destroyed"):
        proxy(1)
    assert (bool(jsnull), jsnull is None, IN_PYODIDE) == (False, False, False)
    assert not isinstance(value, JsProxy)


async def test_js_globals_behave_as_javascript_does() -> None:
    """JSON is compact (NaN as null), parse gives JsDict, Date.now follows the runtime's
    clock, Object.fromEntries builds a JsDict, Error.new makes a JsException."""
    import js

    assert js.JSON.stringify({"a": [1, None, float("nan")], "é": True}) == (
        '{"a":[1,null,null],"é":true}'
    )
    parsed = js.JSON.parse('{"a": {"b": [1, 2]}}')
    assert isinstance(parsed, JsDict) and parsed.a.b == [1, 2]
    with pytest.raises(JsException, match=r"^SyntaxError"):
        js.JSON.parse("{bad")
    clock = VirtualClock(1_000_000)
    async with Runtime(clock=clock):
        assert js.Date.now() == 1_000_000
        await clock.advance(5)
        assert js.Date.now() == 1_000_005
    assert js.Date.new(86_400_000).toISOString() == "1970-01-02T00:00:00.000Z"
    assert js.Object.fromEntries([["k", 1]]) == JsDict(k=1)
    assert str(js.Error.new("boom")) == "Error: boom"


async def test_workers_env_wait_until_and_patch_env() -> None:
    """`workers.env` reaches the served worker's bindings (with `patch_env` on top), and
    `wait_until` runs work in the served worker's ctx."""
    import workers

    context = ExecutionContext()
    serve_worker(JsDict(GREETING="hi", LIMIT=3), context)
    assert (workers.env.GREETING, workers.env.LIMIT) == ("hi", 3)
    with workers.patch_env(GREETING="patched", EXTRA=1):
        assert (workers.env.GREETING, workers.env.EXTRA) == ("patched", 1)
    assert workers.env.GREETING == "hi"
    with pytest.raises(AttributeError):
        _ = workers.env.EXTRA
    ran: list[str] = []

    async def later() -> None:
        ran.append("ran")

    workers.wait_until(later())
    await asyncio.sleep(0)
    assert ran == ["ran"]
    await context.settle()
    cloudflare = workers.import_from_javascript("cloudflare:workers")
    assert cloudflare.env.LIMIT == 3
    with pytest.raises(ImportError, match='No such module "cloudflare:nope"'):
        workers.import_from_javascript("cloudflare:nope")


def test_handler_and_rpc_conversions_keep_values() -> None:
    """`handler` passes arguments through; `python_to_rpc` refuses what the SDK refuses and
    otherwise gives the value back, as `python_from_rpc` does."""
    import workers

    assert workers.handler(lambda a, b: (a, b))(1, 2) == (1, 2)
    value = {"a": [1]}
    assert workers.python_to_rpc(value) is value
    assert workers.python_from_rpc(value) is value
    with pytest.raises(TypeError, match=r"^<class 'tuple'> cannot be sent over RPC\.$"):
        workers.python_to_rpc({"a": (1,)})


async def test_sdk_submodules_and_ctx_and_env_wrapped_once(tmp_path: Path) -> None:
    """`workers.entrypoints` and `workers.rpc` give the SDK's names; an object's `ctx` and
    `env` reach every `__init__` wrapped as the SDK wraps them, once at any depth."""
    import workers
    from workers.entrypoints import DurableObject, DurableObjectAbort, DurableObjectContext
    from workers.rpc import _EnvWrapper, python_from_rpc, python_to_rpc

    assert (workers.DurableObject, workers._EnvWrapper) == (DurableObject, _EnvWrapper)
    assert (python_from_rpc, python_to_rpc) == (workers.python_from_rpc, workers.python_to_rpc)
    assert issubclass(DurableObjectAbort, BaseException)

    def layers(wrapper: Any, inner: str) -> int:
        return (
            0
            if type(wrapper) not in (DurableObjectContext, _EnvWrapper)
            else (1 + layers(getattr(wrapper, inner), inner))
        )

    class Base(DurableObject):
        def __init__(self, ctx: Any, env: Any) -> None:
            self.given = [layers(ctx, "_ctx"), layers(env, "_env")]
            super().__init__(ctx, env)

    class Leaf(Base):
        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)
            self.given += [layers(ctx, "_ctx"), layers(env, "_env")]

        async def seen(self) -> list[Any]:
            await self.ctx.storage.put("k", 1)
            stored = await self.ctx.storage.get("k")
            return [*self.given, layers(self.ctx, "_ctx"), stored, self.env.OTHER is not None]

    class Twice(Base, DurableObject):
        async def seen(self) -> list[Any]:
            return [*self.given, layers(self.env, "_env"), self.ctx.id.name]

    async with Runtime(path=tmp_path, bindings={"LEAF": Leaf, "OTHER": Twice}) as runtime:
        assert await runtime.env.LEAF.getByName("a").seen() == [1, 1, 1, 1, 1, 1, True]
        assert await runtime.env.OTHER.getByName("b").seen() == [1, 1, 1, "b"]
    context = DurableObjectContext(runtime)
    assert DurableObjectContext(context) is context and context._ctx is runtime


def test_stored_values_keep_their_form() -> None:
    """Plain JSON is stored as JSON text (so values stored before still read), anything
    else in a tagged form; both read back as Cloudflare returns them."""
    assert encode({"a": [1, None]}) == '{"a":[1,null]}'
    assert decode('{"a": {"b": 1}}').a.b == 1
    tagged = encode({"s": {1}, "b": memoryview(b"x"), "n": float("nan")})
    assert tagged.startswith("~")
    back: Any = decode(tagged)
    assert (back.s, bytes(back.b), back.n != back.n) == ({1}, b"x", True)


async def test_tagged_values_survive_a_restart(tmp_path: Path) -> None:
    """Bytes, sets, datetimes and big ints stored in a file read back the same after the
    runtime is restarted."""
    import datetime

    from workers import DurableObject

    class Keeper(DurableObject):
        async def keep(self, key: str) -> None:
            await self.ctx.storage.put(
                key, [b"\x00", {2, 1}, datetime.datetime(2024, 1, 1, 1, 1, 1), 2**60]
            )

        async def read(self, key: str) -> Any:
            found = await self.ctx.storage.get(key)
            return [bytes(found[0]), sorted(found[1]), found[2].isoformat(), found[3]]

    async with Runtime(path=tmp_path, bindings={"K": Keeper}) as rt:
        await rt.env.K.getByName("k").keep("v")
    async with Runtime(path=tmp_path, bindings={"K": Keeper}) as rt:
        assert await rt.env.K.getByName("k").read("v") == [
            b"\x00",
            [1, 2],
            "2024-01-01T01:01:01",
            2**60,
        ]


async def test_a_streamed_body_can_be_cloned_and_echoed() -> None:
    """A body given as another message's stream is read once by each clone."""
    request = Request("https://x/", method="POST", body="streamed")
    response = Response(request.body)
    copy = response.clone()
    assert [await copy.text(), await response.text()] == ["streamed", "streamed"]
    assert request.body_used


def test_entry_modules_see_their_vars_at_import(tmp_path: Path) -> None:
    """A project's entry module can read `workers.env` vars at import time, as on
    Cloudflare (its Durable Object namespaces exist once it is served)."""
    from durability.runtime.server import load_worker

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "entry.py").write_text(
        textwrap.dedent(
            """
            from workers import Response, WorkerEntrypoint, env

            AT_IMPORT = env.GREETING

            class Default(WorkerEntrypoint):
                async def fetch(self, request):
                    return Response(AT_IMPORT)
            """
        )
    )
    (tmp_path / "wrangler.jsonc").write_text(
        '{"name": "at-import", "main": "src/entry.py", "vars": {"GREETING": "early"}}'
    )
    worker = load_worker(str(tmp_path))
    assert sys.modules[worker.name].AT_IMPORT == "early"


async def test_run_sync_waits_inside_a_handler_and_refuses_outside(tmp_path: Path) -> None:
    """Inside a handler run_sync blocks until the awaitable is done (a sleep, an object's
    storage, an exception raised through); outside a running loop there is no suspender."""
    from pyodide.ffi import can_run_sync, run_sync

    async def answer() -> int:
        await asyncio.sleep(0.01)
        return 41

    async def fail() -> None:
        raise KeyError("inner")

    class Synced(DurableObject):
        async def stored(self) -> object:
            await self.ctx.storage.put("k", 5)
            return run_sync(self.ctx.storage.get("k"))

    async with Runtime(path=tmp_path, bindings={"SYNCED": Synced}) as runtime:
        assert (can_run_sync(), run_sync(answer())) == (True, 41)
        with pytest.raises(KeyError, match="inner"):
            run_sync(fail())
        assert await runtime.env.SYNCED.getByName("s").stored() == 5
    pending = answer()
    assert await asyncio.to_thread(can_run_sync) is False
    with pytest.raises(RuntimeError, match="No suspender"):
        await asyncio.to_thread(run_sync, pending)
