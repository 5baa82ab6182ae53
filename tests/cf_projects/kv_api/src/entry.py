"""Exercises the key-value API of a Durable Object; each route answers JSON lines."""

import datetime
import json
from urllib.parse import urlsplit

from workers import DurableObject, Response, WorkerEntrypoint


def shown(value):
    """A value as text that reads the same on every host."""
    if isinstance(value, memoryview):
        return f"memoryview({bytes(value)!r})"
    if isinstance(value, dict):
        inner = ", ".join(f"{key!r}: {shown(item)}" for key, item in value.items())
        return f"{type(value).__name__}({{{inner}}})"
    if isinstance(value, list):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if isinstance(value, set):
        return "{" + ", ".join(shown(item) for item in sorted(value)) + "}"
    return repr(value)


async def attempt(label, make):
    """`label: result` of awaiting `make()` (or of calling it), or `label: raised ...`."""
    try:
        result = make()
        if hasattr(result, "__await__"):
            result = await result
    except Exception as error:
        return f"{label}: raised {type(error).__name__}: {error}"
    return f"{label}: {shown(result)}"


class Store(DurableObject):
    async def forms(self):
        s = self.ctx.storage
        await s.deleteAll()
        return [
            await attempt("put one", lambda: s.put("a", 1)),
            await attempt("put many", lambda: s.put({"b": [1, None], "c": {"x": "y"}, "d": "s"})),
            await attempt("put many + options", lambda: s.put({"e": 1}, {"noCache": True})),
            await attempt("put many + value", lambda: s.put({"e": 1}, 5)),
            await attempt("put no value", lambda: s.put("f")),
            await attempt("put keywords", lambda: s.put(key="k", value="v")),
            await attempt("get one", lambda: s.get("a")),
            await attempt("get missing", lambda: s.get("zz")),
            await attempt("get many", lambda: s.get(["d", "a", "zz"])),
            await attempt("get with options", lambda: s.get("a", {"allowConcurrency": True})),
            await attempt("get nothing", lambda: s.get()),
            await attempt("get tuple", lambda: s.get(("a",))),
            await attempt("delete one", lambda: s.delete("k")),
            await attempt("delete again", lambda: s.delete("k")),
            await attempt("delete many", lambda: s.delete(["key", "value", "zz"])),
            await attempt("delete nothing", lambda: s.delete()),
            await attempt("list", lambda: s.list()),
        ]

    async def keys(self):
        s = self.ctx.storage
        await s.deleteAll()
        return [
            await attempt("int key", lambda: s.put(1, "one")),
            await attempt("float key", lambda: s.put(2.5, "two and a half")),
            await attempt("integral float key", lambda: s.put(3.0, "three")),
            await attempt("bool key", lambda: s.put(True, "yes")),
            await attempt("None key", lambda: s.put(None, "null")),
            await attempt("big float key", lambda: s.put(1e21, "big")),
            await attempt("small float key", lambda: s.put(1e-7, "small")),
            await attempt("bytes key", lambda: s.put(b"x", 1)),
            await attempt("get int key", lambda: s.get(1)),
            await attempt("get many int keys", lambda: s.get([1, 3])),
            await attempt("delete int key", lambda: s.delete(1)),
            await attempt("list", lambda: s.list()),
        ]

    async def values(self):
        s = self.ctx.storage
        await s.deleteAll()
        moment = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
        aware = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC)
        stored = {
            "none": None,
            "bool": False,
            "float": 2.5,
            "integral float": 3.0,
            "big int": 2**60,
            "nan": float("nan"),
            "inf": float("-inf"),
            "text": "é ü",
            "bytes": b"\x00\xff",
            "set": {3, 1, 2},
            "naive datetime": moment,
            "aware datetime": aware,
            "nested": {"a": [{"b": None}, [1, 2.0]], "c": {"d": b"z"}},
            "error": ValueError("boom"),
            "empty": "",
        }
        lines = [await attempt("put all", lambda: s.put(stored))]
        for key in stored:
            lines.append(await attempt(f"get {key}", lambda key=key: s.get(key)))
        nested = await s.get("nested")
        lines.append(f"attribute access: {shown(nested.a[0].b)} {shown(nested.c.d)}")
        for label, bad in [
            ("tuple", (1, 2)),
            ("nested tuple", {"a": [1, (2,)]}),
            ("bytearray", bytearray(b"x")),
            ("object", object()),
            ("function", len),
            ("date", datetime.date(2024, 1, 1)),
        ]:
            lines.append(await attempt(f"put {label}", lambda bad=bad: s.put("bad", bad)))
        lines.append(await attempt("bad stored", lambda: s.get("bad")))
        return lines

    async def listing(self):
        s = self.ctx.storage
        await s.deleteAll()
        await s.put({f"k{index}": index for index in range(6)} | {"j": "j", "l": "l"})
        options = [
            ("prefix", {"prefix": "k"}),
            ("limit", {"limit": 2}),
            ("float limit", {"limit": 2.9}),
            ("reverse", {"reverse": True, "limit": 3}),
            ("start", {"start": "k3"}),
            ("startAfter", {"startAfter": "k3"}),
            ("end", {"end": "k2"}),
            ("start and end", {"start": "k1", "end": "k4"}),
            ("prefix and end", {"prefix": "k", "end": "k2"}),
            ("reverse start end", {"start": "k1", "end": "k4", "reverse": True}),
            ("unknown option", {"nope": 1}),
            ("limit 0", {"limit": 0}),
            ("limit -1", {"limit": -1}),
            ("limit None", {"limit": None}),
            ("start and startAfter", {"start": "a", "startAfter": "b"}),
        ]
        lines = [await attempt(f"dict {label}", lambda o=o: s.list(o)) for label, o in options]
        lines.append(await attempt("keywords", lambda: s.list(prefix="k", limit=2, reverse=True)))
        lines.append(await attempt("positional text", lambda: s.list("k")))
        return lines

    async def sync_kv(self):
        s = self.ctx.storage
        await s.deleteAll()
        kv = s.kv
        return [
            await attempt("put", lambda: kv.put("a", {"x": 1})),
            await attempt("put int key", lambda: kv.put(1, [1, None])),
            await attempt("put bytes", lambda: kv.put("b", b"\x01")),
            await attempt("get", lambda: kv.get("a")),
            await attempt("get async", lambda: s.get("a")),
            await attempt("get missing", lambda: kv.get("zz")),
            await attempt("get list", lambda: kv.get(["a", "1"])),
            await attempt("put dict", lambda: kv.put({"c": 1})),
            await attempt("put tuple", lambda: kv.put("t", (1,))),
            await attempt("list", lambda: list(kv.list())),
            await attempt("list options", lambda: list(kv.list(prefix="a"))),
            await attempt("list reverse", lambda: list(kv.list(reverse=True, limit=2))),
            await attempt("list limit 0", lambda: list(kv.list(limit=0))),
            await attempt("delete", lambda: kv.delete("a")),
            await attempt("delete again", lambda: kv.delete("a")),
            await attempt("async list", lambda: s.list()),
        ]

    async def transaction(self):
        s = self.ctx.storage
        await s.deleteAll()

        async def kept(txn):
            await txn.put("kept", 1)
            return await txn.get("kept")

        async def rolled_back(txn):
            await txn.put("dropped", 1)
            txn.rollback()
            return "returned"

        return [
            await attempt("transaction", lambda: s.transaction(kept)),
            await attempt("rollback", lambda: s.transaction(rolled_back)),
            await attempt("list", lambda: s.list()),
        ]

    async def refusals(self):
        s = self.ctx.storage
        await s.deleteAll()
        await s.put({"a": 1, "b": 2, "c": 3})

        async def nothing(txn):
            return None

        return [
            await attempt("limit as a string", lambda: s.list({"limit": "2"})),
            await attempt("limit as text", lambda: s.list({"limit": "two"})),
            await attempt("limit True", lambda: s.list({"limit": True})),
            await attempt("limit 2.7", lambda: s.list({"limit": 2.7})),
            await attempt("limit None", lambda: s.list({"limit": None})),
            await attempt("deleteAll of a number", lambda: s.deleteAll(5)),
            await attempt("deleteAll of a string", lambda: s.deleteAll("x")),
            await attempt("transaction of a number", lambda: s.transaction(5)),
            await attempt("transaction of a function", lambda: s.transaction(nothing)),
            await attempt("deleteAll of options", lambda: s.deleteAll({})),
            await attempt("list after", lambda: s.list()),
        ]

    async def eager(self):
        """Operations act when called: awaited later, or never."""
        s = self.ctx.storage
        await s.deleteAll()
        s.put("k", 1)
        s.setAlarm(4102444800000)
        pending = s.get("k")
        s.put("k", 2)
        bad = s.put()
        lines = [
            await attempt("read started before a write", lambda: pending),
            await attempt("a bad put raises when awaited", lambda: bad),
            await attempt("alarm set unawaited", lambda: s.getAlarm()),
            await attempt("value put unawaited", lambda: s.get("k")),
        ]
        await s.deleteAlarm()
        return lines

    async def remember(self, value):
        await self.ctx.storage.put("remembered", value)
        return await self.ctx.storage.get("remembered")

    async def recall(self):
        return shown(await self.ctx.storage.list({"prefix": "rem"}))


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        route = urlsplit(request.url).path.strip("/")
        store = self.env.STORE.getByName("store")
        if route == "remember":
            value = await store.remember({"at": [1, {"b": None}], "bytes": b"\x02"})
            return Response(shown(value))
        if route == "recall":
            return Response(await store.recall())
        method = getattr(store, route, None) if route in SECTIONS else None
        if method is None:
            return Response("unknown route", status=404)
        return Response(
            json.dumps(await method(), indent=1), headers={"content-type": "application/json"}
        )


SECTIONS = {"forms", "keys", "values", "listing", "sync_kv", "transaction", "eager", "refusals"}
