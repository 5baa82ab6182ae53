"""The errors Cloudflare's JavaScript side raises into Python, as the runtime raises them.

On Cloudflare, a failure inside the Workers runtime (a SQL error, a bad argument, a
missing RPC method) reaches Python as `pyodide.ffi.JsException`, whose text is the
JavaScript error's `name: message`. The embedded runtime raises the same type with the
same text (the `pyodide.ffi` stand-in hands out this class), so `except JsException`
and checks of the message work on both hosts. Where the runtime raised a Python error
before (`ValueError`, `TypeError`, a `sqlite3` error), the exception is an instance of
that class too, so code written against the embedded runtime keeps catching it.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any


class JsException(Exception):
    """A JavaScript error raised into Python: `name` ("TypeError"), `message`, and the
    text `name: message` (just the message when made from Python with one argument)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.name = "Error"
        self.message = str(args[0]) if args else ""

    @property
    def js_error(self) -> JsException:
        """The JavaScript error object (here: the exception itself)."""
        return self


class AbortError(OSError):
    """`pyodide.http.AbortError`: a fetch that failed, with the JavaScript error's text."""


class BodyUsedError(OSError):
    """`pyodide.http.BodyUsedError`: a response body read a second time."""

    def __init__(self, *args: Any) -> None:
        super().__init__("Response body is already used")


class HttpStatusError(OSError):
    """`pyodide.http.HttpStatusError`: `raise_for_status()` on a 4xx or 5xx response."""

    def __init__(self, status: int, status_text: str, url: str) -> None:
        self.status = status
        self.status_text = status_text
        self.url = url
        if 400 <= status < 500:
            kind = "Client Error"
        elif 500 <= status < 600:
            kind = "Server Error"
        else:
            kind = "Invalid error code not between 400 and 599"
        super().__init__(f"{status} {kind}: {status_text} for url: {url}")


@functools.cache
def _flavour(also: tuple[type[BaseException], ...]) -> type[JsException]:
    """`JsException`, or a class named so that is also each class of `also`."""
    if not also:
        return JsException
    return type(
        "JsException",
        (JsException, *also),
        {"__module__": JsException.__module__, "__qualname__": "JsException"},
    )


def js_error(name: str, message: str, *also: type[BaseException]) -> JsException:
    """The `JsException` Cloudflare raises for a JavaScript `name` error with `message`.

    `also`: Python classes the exception is an instance of as well (what the embedded
    runtime raised for the same failure before it raised Cloudflare's type).
    """
    error = _flavour(tuple(also))(f"{name}: {message}")
    error.name = name
    error.message = message
    return error


def python_error(error: BaseException) -> JsException:
    """How a Python exception raised inside an object reaches its caller on Cloudflare:
    `Error: PythonError: Traceback ...` (also an instance of `error`'s class)."""
    text = "".join(traceback.format_exception(error))
    return js_error("Error", f"PythonError: {text}", type(error))
