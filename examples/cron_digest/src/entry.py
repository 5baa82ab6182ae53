"""Notes gathered into a digest on a schedule (cron triggers), with a static page.

POST /api/notes adds a note ({"text": TEXT}); GET /api/digest shows the title (a var,
overridden locally by .dev.vars), the pending notes, the last digests and how many
quarter-hour ticks ran; GET /api/about answers public/about.txt through the ASSETS
binding. Every other path is a static asset (the page at /). The cron triggers run
`Default.scheduled`: every 15 minutes it counts a tick, and at 09:00 UTC on weekdays
it gathers the pending notes into a digest.
"""

import json
from urllib.parse import urlparse

from workers import DurableObject, Response, WorkerEntrypoint

QUARTER_HOUR = "*/15 * * * *"
WEEKDAY_MORNING = "0 9 * * 2-6"


class Digest(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        sql = ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT)")
        sql.exec("CREATE TABLE IF NOT EXISTS digests (at INTEGER PRIMARY KEY, notes TEXT NOT NULL)")
        sql.exec("CREATE TABLE IF NOT EXISTS ticks (at INTEGER PRIMARY KEY)")

    async def add(self, text):
        self.ctx.storage.sql.exec("INSERT INTO notes (text) VALUES (?)", text)

    async def tick(self, at):
        self.ctx.storage.sql.exec("INSERT OR IGNORE INTO ticks (at) VALUES (?)", at)

    async def gather(self, at, keep):
        sql = self.ctx.storage.sql
        notes = [row.text for row in sql.exec("SELECT text FROM notes ORDER BY id")]
        sql.exec("INSERT OR REPLACE INTO digests (at, notes) VALUES (?, ?)", at, json.dumps(notes))
        sql.exec("DELETE FROM notes")
        sql.exec(
            "DELETE FROM digests WHERE at NOT IN (SELECT at FROM digests ORDER BY at DESC LIMIT ?)",
            keep,
        )

    async def show(self):
        sql = self.ctx.storage.sql
        digests = [
            {"at": row.at, "notes": json.loads(row.notes)}
            for row in sql.exec("SELECT at, notes FROM digests ORDER BY at")
        ]
        return json.dumps(
            {
                "pending": [row.text for row in sql.exec("SELECT text FROM notes ORDER BY id")],
                "digests": digests,
                "ticks": sql.exec("SELECT count(*) AS n FROM ticks").one().n,
            }
        )


def _note(body):
    """The note's text from a JSON body, or None when there is none."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    text = data.get("text") if isinstance(data, dict) else None
    return (text.strip() or None) if isinstance(text, str) else None


class Default(WorkerEntrypoint):
    def digest(self):
        return self.env.DIGESTS.getByName("main")

    async def fetch(self, request):
        path = urlparse(request.url).path
        if path == "/api/notes" and request.method == "POST":
            text = _note(await request.text())
            if text is None:
                return Response('send {"text": TEXT} with some text', status=400)
            await self.digest().add(text)
            return Response("added", status=201)
        if path == "/api/digest":
            shown = json.loads(await self.digest().show())
            shown["title"] = self.env.DIGEST_TITLE
            return Response(json.dumps(shown), headers={"content-type": "application/json"})
        if path == "/api/about":
            return await self.env.ASSETS.fetch(request.url.replace("/api/about", "/about.txt"))
        return Response("not found\n", status=404)

    async def scheduled(self, controller, env, ctx):
        if controller.cron == WEEKDAY_MORNING:
            await self.digest().gather(controller.scheduledTime, int(env.KEEP_DIGESTS))
        else:
            await self.digest().tick(controller.scheduledTime)
