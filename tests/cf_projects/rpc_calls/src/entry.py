"""Exercises stub calls: arguments, results, errors and `stub.fetch`."""

import datetime
import json
from urllib.parse import urlsplit

from workers import DurableObject, Request, Response, WorkerEntrypoint


def shown(value):
    """A value as text that reads the same on every host (with the type of each part)."""
    if isinstance(value, memoryview):
        return f"memoryview({bytes(value)!r})"
    if isinstance(value, dict):
        inner = ", ".join(f"{key!r}: {shown(item)}" for key, item in value.items())
        return f"{type(value).__name__}({{{inner}}})"
    if isinstance(value, list):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if isinstance(value, set):
        return "{" + ", ".join(shown(item) for item in sorted(value)) + "}"
    return f"{type(value).__name__}:{value!r}"


async def attempt(label, make):
    """`label: result` of awaiting `make()`, or `label: raised <type>: <last line>` (an
    error raised inside the object arrives with its traceback in the text)."""
    try:
        result = await make()
    except Exception as error:
        last = (str(error).strip().splitlines() or [""])[-1]
        return f"{label}: raised {type(error).__name__}: {last}"
    return f"{label}: {shown(result)}"


async def tried(label, make):
    """`attempt` for a call that may give its result without an awaitable."""

    async def made():
        result = make()
        return await result if hasattr(result, "__await__") else result

    return await attempt(label, made)


class Echo(DurableObject):
    def echo(self, *args):
        return [shown(arg) for arg in args]

    def pair(self, a, b):
        return [shown(a), shown(b)]

    async def give(self, kind):
        values = {
            "dict": {"a": {"b": [{"c": 1}, None]}, "n": None},
            "list": [1, {"x": 2.0}, [3]],
            "float": 2.0,
            "big": 2**60,
            "bytes": b"\x01\x02",
            "set": {2, 1},
            "datetime": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901),
            "none": None,
            "int keys": {1: "one", 2.5: "x"},
            "tuple": (1, 2),
            "object": object(),
        }
        return values[kind]

    async def nested_attributes(self):
        return {"outer": {"inner": [{"leaf": "found"}]}}

    async def fetch(self, request):
        body = await request.text()
        return Response(
            json.dumps(
                {
                    "method": str(request.method),
                    "path": urlsplit(request.url).path,
                    "body": body,
                    "header": request.headers.get("x-probe"),
                }
            ),
            status=203,
            headers={"content-type": "application/json", "x-from": "object"},
        )


class Quiet(DurableObject):
    """No fetch; one method whose result is not a Response when fetched as one."""

    async def ping(self):
        return "pong"


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        route = urlsplit(request.url).path.strip("/")
        echo = self.env.ECHO.getByName("e")
        if route == "arguments":
            cases = [
                ("scalars", lambda: echo.echo(1, "a", None, 1.5, True)),
                ("integral float", lambda: echo.echo(2.0, -0.0, 1e300)),
                ("dict", lambda: echo.echo({"a": {"b": [1, {"c": None}]}})),
                ("int keys", lambda: echo.echo({1: "a", 2.5: "b"})),
                ("list", lambda: echo.echo([1, [2, None]])),
                ("keywords", lambda: echo.echo(1, k=2, j="x")),
                ("bytes", lambda: echo.echo(b"\x00\x01")),
                ("set", lambda: echo.echo({3, 1})),
                ("datetime", lambda: echo.echo(datetime.datetime(2024, 1, 1, 12, 0, 0, 999))),
                (
                    "aware datetime",
                    lambda: echo.echo(
                        datetime.datetime(
                            2024, 1, 1, 12, tzinfo=datetime.timezone(datetime.timedelta(hours=-5))
                        )
                    ),
                ),
                ("big int", lambda: echo.echo(2**60)),
                ("exception", lambda: echo.echo(ValueError("boom"))),
                ("tuple", lambda: echo.echo((1, 2))),
                ("nested tuple", lambda: echo.echo([{"a": (1,)}])),
                ("bytearray", lambda: echo.echo(bytearray(b"x"))),
                ("object", lambda: echo.echo(object())),
                ("date", lambda: echo.echo(datetime.date(2024, 1, 1))),
            ]
            lines = [await attempt(label, make) for label, make in cases]
        elif route == "results":
            kinds = [
                "dict",
                "list",
                "float",
                "big",
                "bytes",
                "set",
                "datetime",
                "none",
                "int keys",
                "tuple",
                "object",
            ]
            lines = [await attempt(kind, lambda kind=kind: echo.give(kind)) for kind in kinds]
            nested = await echo.nested_attributes()
            lines.append(f"attributes: {nested.outer.inner[0].leaf}")
        elif route == "names":
            quiet = self.env.QUIET.getByName("q")
            lines = [
                await attempt("unknown method", lambda: echo.nope()),
                await attempt("private method", lambda: echo._hidden()),
                await attempt("plain method", lambda: quiet.ping()),
                f"stub name: {echo.name}",
            ]
        elif route == "refusals":
            ns = self.env.ECHO
            cases = [
                ("too few arguments", lambda: echo.pair(1)),
                ("too many arguments", lambda: echo.pair(1, 2, 3)),
                ("keyword arguments", lambda: echo.pair(a=1, b=2)),
                ("idFromName of an int", lambda: ns.idFromName(5).equals(ns.idFromName("5"))),
                ("idFromName of True", lambda: ns.idFromName(True).equals(ns.idFromName("true"))),
                (
                    "idFromName of None",
                    lambda: ns.idFromName(None).equals(ns.idFromName("undefined")),
                ),
                ("idFromString of a name", lambda: ns.idFromString("not-an-id")),
                ("idFromString too short", lambda: ns.idFromString("ab" * 10)),
                ("get of a name", lambda: ns.get("e")),
                ("getByName of an int", lambda: ns.getByName(5).name),
                ("newUniqueId elsewhere", lambda: ns.newUniqueId({"jurisdiction": "mars"})),
            ]
            lines = [await tried(label, make) for label, make in cases]
        elif route == "fetch":
            quiet = self.env.QUIET.getByName("q")
            forwarded = await echo.fetch(
                Request(
                    "https://inner.example/path?q=1",
                    method="PUT",
                    body="payload",
                    headers={"x-probe": "yes"},
                )
            )
            by_url = await echo.fetch("https://inner.example/by-url", method="POST", body="text")
            lines = [
                f"status: {forwarded.status} {forwarded.status_text}",
                f"url: {forwarded.url}",
                f"headers: {sorted(forwarded.headers.items())}",
                f"body: {await forwarded.text()}",
                f"by url: {await by_url.json()}",
                await attempt("relative url", lambda: echo.fetch("/relative")),
                await attempt("no fetch method", lambda: quiet.fetch("https://inner.example/")),
            ]
        elif route == "incoming":
            forwarded = await echo.fetch(request)
            return Response(
                await forwarded.text(),
                status=forwarded.status,
                headers={"x-from": forwarded.headers["x-from"]},
            )
        else:
            return Response("unknown route", status=404)
        return Response(json.dumps(lines, indent=1), headers={"content-type": "application/json"})
