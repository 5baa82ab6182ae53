"""What `storage.transaction(fn)` hands its callback: the key-value and alarm methods,
`rollback()`, and `deleteAll()`, each acting inside the transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._types import TimeInput

if TYPE_CHECKING:
    from ._storage import ObjectStorage


class Transaction:
    """The callback's `txn`; `rollback()` makes the transaction undo its writes when the
    callback returns (its result is still returned), as on Cloudflare."""

    __slots__ = ("_rolled_back", "_storage")

    def __init__(self, storage: ObjectStorage) -> None:
        self._storage = storage
        self._rolled_back = False

    @property
    def rolled_back(self) -> bool:
        """Whether `rollback()` was called."""
        return self._rolled_back

    def rollback(self) -> None:
        """Undo every write of the transaction once its callback returns."""
        self._rolled_back = True

    async def get_alarm(self) -> int | None:
        return await self._storage.get_alarm()

    async def set_alarm(self, scheduled_time: TimeInput) -> None:
        await self._storage.set_alarm(scheduled_time)

    async def delete_alarm(self) -> None:
        await self._storage.delete_alarm()

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._storage.get(*args, **kwargs)

    async def put(self, *args: Any, **kwargs: Any) -> None:
        await self._storage.put(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self._storage.delete(*args, **kwargs)

    async def list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._storage.list(*args, **kwargs)

    async def getAlarm(self, *options: Any, **keywords: Any) -> int | None:
        return await self._storage.get_alarm()

    async def setAlarm(self, scheduled_time: object, *options: Any, **keywords: Any) -> None:
        await self._storage.setAlarm(scheduled_time)

    async def deleteAlarm(self, *options: Any, **keywords: Any) -> None:
        await self._storage.delete_alarm()

    async def deleteAll(self, *options: Any, **keywords: Any) -> None:
        await self._storage.delete_all()
