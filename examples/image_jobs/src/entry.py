"""Image jobs: durable resize operations with idempotency keys and input errors.

One `Image` object per image id, its handler declared on the class: `resize_image` is a
durable operation (stored before `POST` answers, retried on its own, 60 s per
attempt, five attempts). A job's id is `resize:<image id>:<width>`, so asking for the
same size again registers nothing new. The handler hands `call.idempotency_key` to the
resizing service, which applies each key once: an attempt whose answer was lost, and
that is run again, gets the same image back instead of a second one.

Two kinds of failure are never retried, because no attempt could succeed: a width out
of range (`InvalidWidth`, checked before calling anyone) and the service's own 4xx
answers, such as a format it cannot read (`ResizeRejected`). Both are listed in the
operation's `RetryPolicy(non_retryable=...)`, so the job fails at once and burns no
attempts. A 5xx answer raises `ResizerUnavailable`, which is retried.

The resizing service is the `RESIZER` binding: here `Resizer`, a Durable Object that
applies one resize per idempotency key and answers like an HTTP service (`status`,
then `image` or `error`). The same file runs on Cloudflare and under
`durability serve examples/image_jobs`.
"""

import json
from urllib.parse import parse_qs, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import Durable, RetryPolicy, operation
from durability.cloudflare import adapt

MAX_WIDTH = 4096
FORMATS = ("jpg", "jpeg", "png", "webp")
"""What the stand-in resizer can read, by file extension."""

SERVICE = "resizer"
"""The one `Resizer` object every image calls."""


class InvalidWidth(ValueError):
    """A width no resizer can produce: the job fails without calling the service."""


class ResizeRejected(Exception):
    """The service refused the input (a 4xx answer): asking again gets the same answer."""


class ResizerUnavailable(Exception):
    """The service failed this time (a 5xx answer): the next attempt may succeed."""


class Image(Durable, DurableObject):
    """The resize jobs of one image."""

    @operation(
        attempt_timeout_ms=60_000,
        retries=RetryPolicy(max_attempts=5, non_retryable=(InvalidWidth, ResizeRejected)),
    )
    async def resize_image(self, call):
        """Resize through the service, which applies each idempotency key once."""
        image_id, width = call.payload["image_id"], call.payload["width"]
        if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= MAX_WIDTH:
            raise InvalidWidth(f"width must be an integer from 1 to {MAX_WIDTH}, got {width!r}")
        answer = await self.env.RESIZER.getByName(SERVICE).resize(
            call.idempotency_key, image_id, width, call.payload.get("fail_first", 0)
        )
        status = answer["status"]
        if 400 <= status < 500:
            raise ResizeRejected(f"the resizer refused {image_id} ({status}): {answer['error']}")
        if status != 200:
            raise ResizerUnavailable(f"the resizer answered {status}: {answer['error']}")
        return answer["image"]

    async def resize(self, image_id, width, fail_first=0):
        """Register the job (a no-op when it exists); returns its id once it is durable."""
        job_id = f"resize:{image_id}:{width}"
        payload = {"image_id": image_id, "width": width, "fail_first": fail_first}
        await self.resize_image(job_id, payload)
        return job_id

    async def result(self, image_id, width):
        """The stored state of the job for `width`, as JSON."""
        job_id = f"resize:{image_id}:{width}"
        result = await self.resize_image.get_result(job_id)
        error = result.error
        return {
            "job": job_id,
            "status": result.status,
            "attempt": result.attempt,
            "image": result.result,
            "last_error": result.last_error,
            "error": None if error is None else {"name": error.name, "message": error.message},
        }


class Resizer(DurableObject):
    """A stand-in resizing service: one resize per idempotency key, kept in SQL.

    `fail_first` is demo fault injection: the first that many requests for a key
    answer 503, as a busy service would.
    """

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        # The adapted SQL reads NULL as None on every host (Cloudflare's own may give
        # JavaScript's null).
        self.sql = adapt(ctx).storage.sql
        self.sql.exec(
            "CREATE TABLE IF NOT EXISTS requests (idempotency_key TEXT PRIMARY KEY,"
            " image_id TEXT NOT NULL, width INTEGER NOT NULL, calls INTEGER NOT NULL,"
            " image TEXT)"
        )

    async def resize(self, idempotency_key, image_id, width, fail_first=0):
        """Resize once per key; a repeated key answers with the image made before."""
        sql = self.sql
        sql.exec(
            "INSERT INTO requests (idempotency_key, image_id, width, calls) VALUES (?, ?, ?, 1)"
            " ON CONFLICT (idempotency_key) DO UPDATE SET calls = calls + 1",
            idempotency_key,
            image_id,
            width,
        )
        row = sql.exec(
            "SELECT calls, image FROM requests WHERE idempotency_key = ?", idempotency_key
        ).one()
        if row["image"] is not None:
            return {"status": 200, "image": row["image"]}
        if row["calls"] <= fail_first:
            return {"status": 503, "error": f"busy (request {row['calls']} of this key)"}
        if image_id.rpartition(".")[2].lower() not in FORMATS:
            return {"status": 415, "error": f"cannot read {image_id!r}"}
        image = f"resized/{width}/{image_id}"
        sql.exec("UPDATE requests SET image = ? WHERE idempotency_key = ?", image, idempotency_key)
        return {"status": 200, "image": image}

    async def requests(self, image_id):
        """What the service was asked for `image_id`: calls per key and the image made."""
        cursor = self.sql.exec(
            "SELECT width, calls, image FROM requests WHERE image_id = ? ORDER BY width",
            image_id,
        )
        return [dict(row) for row in cursor]


USAGE = """durability image jobs demo
  POST /IMAGE/resize?width=W[&fail=N]  register the resize job (202 with its id); the
                                       resizer answers 503 to its first N requests
  GET  /IMAGE/result?width=W           the job: pending, completed (with the image) or failed
  GET  /IMAGE/upstream                 what the resizer was asked for IMAGE, per width
"""


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


def _width(query):
    """The `width` parameter: an int when it is one, else the text as given (the job
    rejects it), None when missing."""
    text = query.get("width", [""])[-1]
    if not text:
        return None
    return int(text) if text.isascii() and text.isdigit() else text


MAX_FAIL = 100
"""The most demo failures (`fail`) a job may ask the resizer for."""


def _fail(query):
    """The `fail` parameter (0 when absent); ValueError says what is wrong."""
    text = query.get("fail", ["0"])[-1]
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_FAIL:
        raise ValueError(f"fail must be a whole number from 0 to {MAX_FAIL}")
    return int(text)


def _allowed(route):
    """The methods a route answers to; empty for a path that is no route."""
    match route:
        case [] | [_, "upstream"] | [_, "result"]:
            return ("GET",)
        case [_, "resize"]:
            return ("POST",)
    return ()


def not_allowed(method, allowed):
    """405 for a route asked with the wrong method, naming the methods it takes."""
    text = f"{method} is not allowed here: use {' or '.join(allowed)}\n"
    return Response(text, status=405, headers={"allow": ", ".join(allowed)})


class Default(WorkerEntrypoint):
    """Registers resize jobs and reads their results."""

    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        query = parse_qs(url.query, keep_blank_values=True)
        match request.method, parts:
            case "GET", []:
                return Response(USAGE)
            case "GET", [image_id, "upstream"]:
                resizer = self.env.RESIZER.getByName(SERVICE)
                return json_response(await resizer.requests(image_id))
            case ("POST", [image_id, "resize"]) | ("GET", [image_id, "result"]):
                width = _width(query)
                if width is None:
                    return Response("width is required", status=400)
                image = self.env.IMAGES.getByName(image_id)
                if request.method == "GET":
                    return json_response(await image.result(image_id, width))
                try:
                    fail_first = _fail(query)
                except ValueError as error:
                    return Response(f"{error}\n", status=400)
                job = await image.resize(image_id, width, fail_first)
                return json_response({"job": job}, status=202)
        allowed = _allowed(parts)
        return not_allowed(request.method, allowed) if allowed else Response(USAGE, status=404)
