"""Report workflow: a workflow that runs inside its own Durable Object.

`POST /{id}` starts the report `id` (202); `GET /{id}` shows its status. The `report`
workflow of the `ReportWorkflow` object `id` runs two steps in parallel: `prepare`
(retried up to 3 times, 1 s apart doubling, 30 s per attempt) and `started`; then
`step.sleep("wait before finishing", 2 s)`, during which the object holds no task and
may be evicted (the sleep resumes through the object's alarm); then `finish` returns
`{id, preparedAt, startedAt}`. Each step's result is stored in the object's SQLite;
steps, retries and the wake-up all run inside the object.
"""

import asyncio
import json
from urllib.parse import urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import Durable, now_ms, workflow

PREPARE = {
    "retries": {"limit": 3, "delay": "1 second", "backoff": "exponential"},
    "timeout": "30 seconds",
}


class ReportWorkflow(Durable, DurableObject):
    """One report, produced by the object's `report` workflow."""

    @workflow
    async def report(self, event, step):
        @step.do(config=PREPARE)
        async def prepare():
            return now_ms()

        @step.do()
        async def started():
            return now_ms()

        prepared_at, started_at = await asyncio.gather(prepare(), started())
        await step.sleep("wait before finishing", "2 seconds")

        @step.do()
        async def finish():
            return {"id": event.payload["id"], "preparedAt": prepared_at, "startedAt": started_at}

        return await finish()

    async def start(self, report_id):
        """Start the report; False when it was started before."""
        try:
            await self.report.create(id=report_id, params={"id": report_id})
        except Exception:
            return False
        return True

    async def status(self, report_id):
        """The report's `{status, error, output}`, or None when it was never started."""
        try:
            instance = await self.report.get(report_id)
        except Exception:
            return None
        return dict(await instance.status())


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    """`POST /{id}` starts the report, `GET /{id}` returns its status."""

    async def fetch(self, request):
        parts = [part for part in urlsplit(request.url).path.split("/") if part]
        if len(parts) != 1:
            return Response("Expected POST /{id} or GET /{id}", status=404)
        report_id = parts[0]
        stub = self.env.REPORTS.getByName(report_id)
        if request.method == "POST":
            if not await stub.start(report_id):
                return Response("already started", status=409)
            return json_response({"id": report_id}, 202)
        if request.method == "GET":
            status = await stub.status(report_id)
            if status is None:
                return Response("no such report", status=404)
            return json_response(status)
        return Response("Method not allowed", status=405)
