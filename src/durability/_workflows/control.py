"""What the instance API does to an object's instances: create, status, pause, resume,
terminate, restart, events. Each call is one transaction (the alarm reconciled in it)
and then, where the instance is due now, an eager start of its run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._serialization import serialize
from .._uuid import random_uuid
from . import journal, rows
from .errors import WorkflowError
from .rows import TERMINAL_STATES, InstanceRow
from .runner import Runner
from .validate import MAX_BATCH, check_event_type, check_instance_id
from .values import AttrDict


class Control:
    """The instance calls of one object, on its runner."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    @property
    def _sql(self) -> SqlStorage:
        return self.runner.engine.sql

    def row(self, workflow: str, instance_id: str) -> InstanceRow:
        """The instance's row; `WorkflowError` when there is no such instance."""
        found = rows.read_instance(self._sql, rows.instance_key(workflow, instance_id))
        if found is None:
            raise WorkflowError(f'workflow "{workflow}" has no instance "{instance_id}"')
        return found

    async def create(self, workflow: str, instance_id: str | None, params: Any) -> str:
        """Add an instance (a random id when `instance_id` is `None`) and start it;
        `WorkflowError` when the id is taken."""
        created = await self._add(workflow, [(instance_id, params)], reuse=False)
        return created[0]

    async def create_batch(
        self, workflow: str, batch: Sequence[tuple[str | None, Any]]
    ) -> list[str]:
        """Add up to 100 instances at once; ids that exist already are left as they are."""
        if not batch:
            raise WorkflowError("create_batch needs at least 1 instance")
        if len(batch) > MAX_BATCH:
            raise WorkflowError(
                f"create_batch takes at most {MAX_BATCH} instances, got {len(batch)}"
            )
        return await self._add(workflow, batch, reuse=True)

    async def _add(
        self, workflow: str, batch: Sequence[tuple[str | None, Any]], *, reuse: bool
    ) -> list[str]:
        """Insert the new instances and start them: those the write could claim (permits
        were free) run once its commit is durable, the others as permits come free."""
        now = now_ms()
        ids: list[str] = []
        prepared: dict[str, tuple[int, str, str, str]] = {}
        for instance_id, params in batch:
            chosen = random_uuid() if instance_id is None else check_instance_id(instance_id)
            text = serialize({} if params is None else params, "params")
            ids.append(chosen)
            key = rows.instance_key(workflow, chosen)
            if key not in prepared:
                prepared[key] = (len(prepared), chosen, text, random_uuid())
        runner = self.runner
        claims = runner.claims(
            workflow,
            [(at, key, generation, now) for key, (at, _, _, generation) in prepared.items()],
        )
        queued: list[tuple[str, str]] = []

        def write(sql: SqlStorage) -> int | None:
            queued.clear()
            inserted = 0
            for key, (position, chosen, text, generation) in prepared.items():
                alone = claims.claim_alone(position)
                if not rows.insert_instance(
                    sql, key, workflow, chosen, generation, text, now, alone
                ):
                    if not reuse:
                        raise WorkflowError(
                            f'workflow "{workflow}" already has an instance "{chosen}" '
                            "(instance ids are unique within a workflow)"
                        )
                    continue
                inserted += 1
                if alone is None:
                    queued.append((key, generation))
                else:
                    claims.inserted(
                        rows.claimed_row(key, workflow, chosen, generation, text, now, alone)
                    )
            claims.written(inserted)
            return now if inserted else None

        try:
            await runner.engine.transaction(write, due_at=lambda due: due, timed=False)
        except BaseException:
            claims.release()
            raise
        claims.start(ids[0])
        runner.start([(workflow, key, generation, now, 0) for key, generation in queued])
        return ids

    def status(self, workflow: str, instance_id: str) -> AttrDict:
        """`{status, error, output}` of the instance."""
        return self.row(workflow, instance_id).status_view()

    async def pause(self, workflow: str, instance_id: str) -> None:
        """Pause a queued, running or waiting instance: a running one finishes the steps
        it is running (``waitingForPause``), then stops until `resume()`."""
        row = self.row(workflow, instance_id)
        if row.state not in ("queued", "running", "waiting"):
            return
        engine = self.runner.engine
        if row.key in engine.running:
            engine.write(lambda sql: rows.set_state(sql, row.key, "waitingForPause", now_ms()))
            run = self.runner.runs.get(row.key)
            if run is not None:
                run.set_pausing(True)
            return
        await engine.transaction(lambda sql: rows.pause_now(sql, row.key, now_ms()))

    async def resume(self, workflow: str, instance_id: str) -> None:
        """Resume a paused instance (its sleeps and deadlines move by the time paused),
        or take back a pause not taken yet; otherwise nothing."""
        row = self.row(workflow, instance_id)
        runner = self.runner
        if row.state == "waitingForPause":
            runner.engine.write(lambda sql: rows.set_state(sql, row.key, "running", now_ms()))
            run = runner.runs.get(row.key)
            if run is not None:
                run.set_pausing(False)
            return
        if row.state != "paused":
            return
        await runner.engine.transaction(
            lambda sql: rows.resume_paused(sql, row.key, now_ms()), due_at=lambda due: due
        )
        runner.start([(workflow, row.key, row.generation, row.created_at, row.attempt)])

    async def terminate(self, workflow: str, instance_id: str) -> None:
        """End the instance as terminated; `WorkflowError` if it already ended."""
        row = self.row(workflow, instance_id)
        if row.state in TERMINAL_STATES:
            raise WorkflowError(
                f'cannot terminate workflow instance "{instance_id}": it is already {row.state}'
            )
        await self.runner.engine.transaction(lambda sql: rows.terminate(sql, row.key, now_ms()))
        self._abort(row.key)

    async def restart(self, workflow: str, instance_id: str) -> None:
        """Run the instance again from its first step, with the same params."""
        row = self.row(workflow, instance_id)
        generation = random_uuid()
        await self.runner.engine.transaction(
            lambda sql: rows.restart(sql, row.key, generation, now_ms()), due_at=lambda due: due
        )
        self._abort(row.key)
        self.runner.start([(workflow, row.key, generation, row.created_at, 0)])

    async def send_event(
        self, workflow: str, instance_id: str, event_type: str, payload: Any
    ) -> None:
        """Send an event: a `wait_for_event` of its type takes it, now or later.
        `WorkflowError` when the instance has ended."""
        check_event_type(event_type)
        text = serialize(payload, "payload")
        row = self.row(workflow, instance_id)
        if row.state in TERMINAL_STATES:
            raise WorkflowError(
                f'workflow instance "{instance_id}" is {row.state} and takes no more events'
            )
        runner = self.runner
        run = runner.runs.get(row.key)

        def write(sql: SqlStorage) -> int | None:
            now = now_ms()
            awaited = journal.add_event(sql, row.key, event_type, text, now)
            if run is None and awaited and rows.wake_now(sql, row.key, now):
                return now
            return None

        woken = await runner.engine.transaction(write, due_at=lambda due: due)
        if run is not None:
            run.deliver(event_type)
        elif woken is not None:
            runner.start([(workflow, row.key, row.generation, row.created_at, row.attempt)])

    def _abort(self, key: str) -> None:
        run = self.runner.runs.get(key)
        if run is not None:
            run.abort()

    def abort_all(self) -> None:
        """Stop every run here (the object's storage was deleted)."""
        for run in list(self.runner.runs.values()):
            run.abort()
