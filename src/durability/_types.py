"""Accepted-input unions shared across the package: JSON values, SQL values, times."""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""A JSON value: what payloads, results and log bodies may be."""

SqlValue: TypeAlias = "int | float | str | bytes | None"
"""A value SQLite stores and the Workers SQL API accepts (bools are bound as 0/1)."""

TimeInput: TypeAlias = "int | datetime"
"""Milliseconds since the Unix epoch, or an aware datetime."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer both SQLite here and the Workers SQL API bind exactly."""

STAND_IN_MARK = "__durability_stand_in__"
"""Set (true) on a module the embedded runtime provides in place of a Pyodide one (`js`,
`pyodide`, `workers`), so the Cloudflare adapter can tell it is not on Cloudflare."""
