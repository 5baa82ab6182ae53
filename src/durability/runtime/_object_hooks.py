"""What an object's database tells the runtime: its alarm commits (for the alarm driver
and the catalog), a failed commit (the instance is rebuilt), and whether the object is
busy (its connection is then kept open)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._catalog_file import Key
from ._database import Database, FlushHook
from ._log_syncs import UNCHANGED

if TYPE_CHECKING:
    from ._alarm_driver import AlarmDriver
    from ._instance import Instance


class Unwatched:
    """The hooks of a database nobody watches (a tool's, or a test's): nothing to do."""

    def prepare_commit(self, database: Database) -> tuple[FlushHook | None, object]:
        return None, UNCHANGED

    def committed(self, database: Database, prepared: object) -> None:
        """Nothing follows an alarm commit of an unwatched database."""

    def commit_failed(self, database: Database, error: BaseException) -> None:
        """Nothing is rebuilt for an unwatched database: its callers get the error."""

    def busy(self) -> bool:
        return False


UNWATCHED = Unwatched()


class ObjectHooks:
    """The hooks of one object's database in a runtime.

    `name` and `instance` are filled in once the runtime knows them (the name may be
    read from the database itself; the instance is built on it)."""

    __slots__ = ("_failed", "_host_alarms", "_key", "instance", "name")

    def __init__(
        self,
        key: Key,
        host_alarms: AlarmDriver,
        failed: Callable[[Key, Database, BaseException], None],
    ) -> None:
        self._key = key
        self._host_alarms = host_alarms
        self._failed = failed
        self.name: str | None = None
        self.instance: Instance | None = None

    def prepare_commit(self, database: Database) -> tuple[FlushHook | None, object]:
        return self._host_alarms.prepare_commit(self._key, self.name, database)

    def committed(self, database: Database, prepared: object) -> None:
        self._host_alarms.committed(self._key, self.name, prepared)

    def commit_failed(self, database: Database, error: BaseException) -> None:
        self._failed(self._key, database, error)

    def busy(self) -> bool:
        instance = self.instance
        return instance is not None and bool(instance.tasks)
