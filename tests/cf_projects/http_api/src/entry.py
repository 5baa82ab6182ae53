"""Exercises the SDK's HTTP classes and the `workers`, `js` and `pyodide` modules."""

import json
from http import HTTPStatus
from urllib.parse import urlsplit

import js
from pyodide.ffi import JsException, create_proxy, to_js
from workers import Blob, File, FormData, Request, Response, WorkerEntrypoint, env, fetch

GREETING_AT_IMPORT = env.GREETING


async def attempt(label, make):
    """`label: result` of awaiting `make()` (or of calling it), or `label: raised ...`."""
    try:
        result = make()
        if hasattr(result, "__await__"):
            result = await result
    except Exception as error:
        return f"{label}: raised {type(error).__name__}: {error}"
    return f"{label}: {result!r}"


def json_answer(value):
    return Response(json.dumps(value, indent=1), headers={"content-type": "application/json"})


RESPONSES = {
    "text": lambda: Response("plain text"),
    "bytes": lambda: Response(b"\x00raw"),
    "empty": lambda: Response(),
    "none": lambda: Response(None, status=202),
    "status-text": lambda: Response("made", 201, "Made It"),
    "http-status": lambda: Response("gone", status=HTTPStatus.GONE),
    "zero-status": lambda: Response("zero", status=0),
    "text-status": lambda: Response("text status", status="404"),
    "headers-dict": lambda: Response("h", headers={"X-Custom": "1", "Content-Type": "text/x"}),
    "headers-list": lambda: Response(
        "h", headers=[("x-a", "1"), ("x-a", "2"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]
    ),
    "json": lambda: Response.json({"a": [1, None, 2.5], "é": "ü", "t": True}),
    "json-list": lambda: Response.json([1, "two"], status=201, status_text="Listed"),
    "json-headers": lambda: Response.json("s", headers={"content-type": "text/json-ish", "x": "y"}),
    "json-nan": lambda: Response.json({"n": float("nan")}),
    "json-int-keys": lambda: Response.json({1: "one"}),
    "redirect": lambda: Response.redirect("https://example.com"),
    "redirect-301": lambda: Response.redirect("https://Example.COM/a b?c=d e", 301),
    "redirect-status": lambda: Response.redirect("https://example.com/x", HTTPStatus.SEE_OTHER),
    "js-response": lambda: Response(js.Response.new("from js", status=206)),
    "js-json": lambda: js.Response.json(
        to_js({"a": [1, None]}, dict_converter=js.Object.fromEntries)
    ),
    "blob-object": lambda: Response(Blob(["blob ", b"parts"], "text/x-blob").js_object),
}


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlsplit(request.url)
        route = parts.path.strip("/")
        if route.startswith("response/"):
            return RESPONSES[route.removeprefix("response/")]()
        if route == "echo":
            return Response(
                request.body, status=200, headers={"content-type": "application/x-echo"}
            )
        if route == "request":
            return json_answer(await self.describe(request, parts))
        if route == "errors":
            return json_answer(await self.errors())
        if route == "blobs":
            return json_answer(await self.blobs())
        if route == "modules":
            return json_answer(await self.modules())
        if route == "form":
            form = await request.form_data()
            entries = [
                [
                    name,
                    value if isinstance(value, str) else f"File {value.name} {await value.text()}",
                ]
                for name, value in form.items()
            ]
            return json_answer(
                {"entries": entries, "first a": form["a"], "all a": form.get_all("a")}
            )
        if route == "raise":
            raise ValueError("the worker failed")
        if route == "not-a-response":
            return "text"
        return Response("unknown route", status=404)

    async def describe(self, request, parts):
        headers = request.headers
        text = await request.text()
        return {
            "method": str(request.method),
            "method is POST": request.method == "POST",
            "query": parts.query,
            "x-multi": headers["X-Multi"],
            "x-multi all": headers.get_all("x-multi"),
            "missing": headers["x-missing"],
            "cookies": headers.get_all("set-cookie"),
            "content-type": headers.get("content-type"),
            "has x-multi": "X-MULTI" in headers,
            "body": text,
            "body used": request.body_used,
            "read again": await attempt("read again", request.text),
            "redirect": request.redirect,
            "keepalive": request.keepalive,
            "integrity": request.integrity,
        }

    async def errors(self):
        return [
            await attempt("unsupported body", lambda: Response(123)),
            await attempt("bad headers", lambda: Response("x", headers=5)),
            await attempt("status below 200", lambda: Response("x", status=42)),
            await attempt("status 600", lambda: Response("x", status=600)),
            await attempt("body with 204", lambda: Response("x", status=204)),
            await attempt("json of an object", lambda: Response.json(object())),
            await attempt("relative redirect", lambda: Response.redirect("/relative")),
            await attempt("redirect status 200", lambda: Response.redirect("https://e.com", 200)),
            await attempt("relative request", lambda: Request("/relative")),
            await attempt(
                "GET with body", lambda: Request("https://e.com", method="GET", body="x")
            ),
            await attempt("fetch relative", lambda: fetch("/relative")),
            await attempt("fetch ftp", lambda: fetch("ftp://example.com/")),
            await attempt(
                "Response from js with options", lambda: Response(js.Response.new("x"), status=201)
            ),
            await attempt("read twice", lambda: _read_twice(Response("once"))),
            await attempt("clone then read", lambda: _clone_then_read(Response("cloned"))),
        ]

    async def blobs(self):
        blob = Blob(["héllo ", b"world", Blob(["!"])], content_type="Text/Plain")
        file = File([b"abc"], "name.txt", content_type="text/plain", last_modified=1234)
        form = FormData({"a": "1", "f": file})
        form.append("a", "2")
        form["b"] = "3"
        sliced = blob.slice(1, 5)
        return {
            "blob size": blob.size,
            "blob type": blob.content_type,
            "blob text": await blob.text(),
            "slice": await sliced.text(),
            "file": [file.name, file.last_modified, await file.bytes() == b"abc"],
            "form keys": list(form.keys()),
            "form a": form["a"],
            "form all a": form.get_all("a"),
            "form missing": form["zz"],
            "form has f": "f" in form,
            "form f name": form["f"].name,
            "form blob becomes file": FormData({"upload": Blob(["x"])})["upload"].name,
        }

    async def modules(self):
        proxy = create_proxy(lambda x: x * 2)
        answer = {
            "env at import": GREETING_AT_IMPORT,
            "env var": self.env.GREETING,
            "env number": self.env.LIMIT,
            "workers.env": env.LIMIT,
            "JSON.stringify": js.JSON.stringify(
                to_js({"a": [1, None], "b": "é"}, dict_converter=js.Object.fromEntries)
            ),
            "JSON.parse": js.JSON.parse('{"a": {"b": [1, 2]}}').a.b[1],
            "Date(0)": js.Date.new(0).toISOString(),
            "Date.getTime": js.Date.new(86_400_000).getTime(),
            "Date.now is an int": isinstance(js.Date.now(), int),
            "proxy call": proxy(21),
            "to_js of an int": to_js(5),
            "Error": await attempt("Error", lambda: _raise(js.Error.new("boom"))),
            "JsException catches": await attempt("caught", lambda: _catch_js()),
        }
        proxy.destroy()
        js.console.log("modules route answered")
        return answer


def _raise(error):
    raise error


def _catch_js():
    try:
        Request("/relative")
    except JsException as error:
        return f"JsException {error.name}"
    return "not raised"


async def _read_twice(response):
    await response.text()
    return await response.text()


async def _clone_then_read(response):
    copy = response.clone()
    return [await copy.text(), await response.text()]
