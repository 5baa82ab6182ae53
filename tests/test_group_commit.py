"""One caller registering operations one after another on a file-backed object: each
registration's commit also carries the success of the operation before it, so the
caller's steady pace costs one sync per operation, not two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durability import Durability, DurableCall
from durability.runtime import DurableObject, Runtime, _commit_threads, _log_syncs


class Registering(DurableObject):
    """Registers no-op operations; reports how each one ended."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.durability = Durability(context=ctx, handlers={"noop": self._noop})

    def _noop(self, call: DurableCall[Any]) -> str:
        return call.id

    async def register(self, id: str) -> None:
        await self.durability.noop(id=id)

    async def statuses(self, ids: list[str]) -> list[str]:
        return [(await self.durability.noop.job(id).wait()).status for id in ids]


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the runtime's log syncs (each still made); syncs count as quick, so a lone
    object's run on the loop, as they do on a fast disk."""
    made: list[int] = []
    sync = _log_syncs._sync_data

    def counting(descriptor: int) -> None:
        made.append(descriptor)
        sync(descriptor)

    monkeypatch.setattr(_log_syncs, "_sync_data", counting)
    monkeypatch.setattr(_commit_threads, "QUICK_SYNC_SECONDS", 3600.0)
    return made


async def test_one_caller_in_series_costs_one_sync_per_operation(
    tmp_path: Path, syncs: list[int]
) -> None:
    operations = 40
    async with Runtime(path=tmp_path, bindings={"OPS": Registering}) as runtime:
        stub: Any = runtime.env.OPS.get_by_name("one")
        await stub.register("warm-up")
        assert await stub.statuses(["warm-up"]) == ["completed"]
        before = len(syncs)
        for number in range(operations):
            await stub.register(f"op-{number}")
        made = len(syncs) - before
        ids = [f"op-{number}" for number in range(operations)]
        assert await stub.statuses(ids) == ["completed"] * operations
    # The last success syncs alone; a few spare for a sync a thread's timing splits.
    assert made <= operations + 3, f"{made} syncs for {operations} operations"
