"""Storage fault injection: chosen SQL statements fail with a real `sqlite3` error.

`StorageFaults.install(monkeypatch)` wraps every connection `sqlite3.connect` opens
from then on; each wrapped `execute` first asks the plan whether this statement, on
this file, must fail. A rule matches a file name part and a statement prefix and
fails a number of matching calls (optionally after letting some pass), so a test can
break exactly one commit, one alarm write or one catalog write, then let the same
code run again against a healthy disk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Rule:
    """Fail `times` calls whose file contains `file_part` and statement starts `statement`."""

    file_part: str
    statement: str
    times: int
    skip: int = 0
    message: str = "disk I/O error"
    every: int = 1
    """Fail only every `every`-th matching call (the others pass)."""
    failed: int = 0
    seen: int = 0

    def matches(self, file: str, sql: str) -> bool:
        return self.file_part in file and sql.lstrip().upper().startswith(self.statement)


@dataclass
class StorageFaults:
    """The plan of failures, shared by every wrapped connection."""

    rules: list[Rule] = field(default_factory=list)
    injected: int = 0
    opened: list[str] = field(default_factory=list)
    """Every database file connected to, in order."""
    probes: list[tuple[str, str, Callable[[], None]]] = field(default_factory=list)

    def fail(
        self,
        file_part: str,
        statement: str,
        *,
        times: int = 1,
        skip: int = 0,
        every: int = 1,
        message: str = "",
    ) -> Rule:
        """Fail `times` matching statements (after `skip` pass), every `every`-th one."""
        rule = Rule(file_part, statement.upper(), times, skip, message or "disk I/O error", every)
        self.rules.append(rule)
        return rule

    def watch(self, file_part: str, statement: str, probe: Callable[[], None]) -> None:
        """Call `probe()` just before each matching statement runs (it is not failed)."""
        self.probes.append((file_part, statement.upper(), probe))

    def stop(self) -> None:
        """Let every statement through from now on (probes stay)."""
        self.rules.clear()

    def check(self, file: str, sql: str) -> None:
        for file_part, statement, probe in self.probes:
            if file_part in file and sql.lstrip().upper().startswith(statement):
                probe()
        for rule in self.rules:
            if rule.failed < rule.times and rule.matches(file, sql):
                if rule.skip:
                    rule.skip -= 1
                    continue
                rule.seen += 1
                if rule.seen % rule.every:
                    continue
                rule.failed += 1
                self.injected += 1
                raise sqlite3.OperationalError(rule.message)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> StorageFaults:
        """Wrap the connections opened from now on (undone when the test ends)."""
        real_connect = sqlite3.connect

        def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
            self.opened.append(str(database))
            return FaultyConnection(real_connect(database, *args, **kwargs), self, str(database))

        monkeypatch.setattr(sqlite3, "connect", connect)
        return self


class FaultyConnection:
    """A `sqlite3.Connection` whose `execute` consults the fault plan first."""

    def __init__(self, real: sqlite3.Connection, faults: StorageFaults, file: str) -> None:
        self._real = real
        self._faults = faults
        self._file = file

    def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        self._faults.check(self._file, sql)
        return self._real.execute(sql, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)
