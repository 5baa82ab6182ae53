"""The rows of one SQL statement, read in full before the caller sees them.

Both hosts answer `sql.exec` with one of these: the embedded runtime over `sqlite3`
and the Cloudflare adapter over Cloudflare's cursor. Each says how a row is built.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from operator import length_hint
from typing import Any, Generic, TypeVar

RowT = TypeVar("RowT", bound=dict[str, Any])


class ReadRows(ABC, Generic[RowT]):
    """The rows of one statement, already read; consumed as they are iterated."""

    __slots__ = ("_columns", "_rows", "_rows_read", "_rows_written")

    def __init__(
        self,
        columns: list[str],
        rows: list[tuple[Any, ...]],
        rows_read: int,
        rows_written: int,
    ) -> None:
        self._columns = columns
        # One iterator over the rows, shared by rows and raw tuples: reading either
        # consumes both, and it iterates in C.
        self._rows: Iterator[tuple[Any, ...]] = iter(rows)
        self._rows_read = rows_read
        self._rows_written = rows_written

    @abstractmethod
    def _row(self, pairs: Iterable[tuple[str, Any]]) -> RowT:
        """One row built from its (column, value) pairs."""

    @property
    def column_names(self) -> list[str]:
        """The result column names, in order."""
        return list(self._columns)

    @property
    def rows_read(self) -> int:
        """Rows the statement read, as the host counts them."""
        return self._rows_read

    @property
    def rows_written(self) -> int:
        """Rows the statement inserted, updated or deleted."""
        return self._rows_written

    def __iter__(self) -> Iterator[RowT]:
        return self

    def __next__(self) -> RowT:
        return self._row(zip(self._columns, next(self._rows), strict=True))

    def to_list(self) -> list[dict[str, Any]]:
        """Every remaining row as a dict (typed as `SqlCursor.to_list` has it: a list is
        invariant, and a host's rows may be a dict subclass)."""
        return list[dict[str, Any]](self)

    def one(self) -> RowT:
        """The only remaining row; `ValueError` unless there is exactly one."""
        remaining = length_hint(self._rows)
        if remaining != 1:
            # Cloudflare's own wording, as observed on workerd.
            got = "no results" if remaining == 0 else "multiple results"
            raise ValueError(f"Expected exactly one result from SQL query, but got {got}.")
        return next(self)

    def raw(self) -> Iterator[tuple[Any, ...]]:
        """The remaining rows as tuples, in column order."""
        return self._rows
