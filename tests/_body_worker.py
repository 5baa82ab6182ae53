"""A worker module for the `durability serve` guard tests: every request is answered
with the size of its body."""

from __future__ import annotations

from typing import Any

from durability.runtime import Request, Response

bindings: dict[str, Any] = {}


async def fetch(request: Request, env: Any) -> Response:
    body = await request.bytes()
    return Response.json({"bytes": len(body)})
