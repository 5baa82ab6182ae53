"""Onboarding drip: a durable workflow inside each user's Durable Object.

One `Onboarding` object per user. Signing up starts the object's `drip` workflow (its
instance id is the user's name, so a user is signed up once). The drip sends a welcome
email, waits a day (`?interval=SECONDS` for a demo) and sends tips, then waits up to
three intervals for the user to activate their account: activated, it sends a
congratulation; not, a nudge. Three intervals later it sends a last check-in.

The emails go to the object's own `outbox` table from plain (not async) steps: such a
step runs inside the transaction that records its result, so each email is written
exactly once, with its step, whatever crashes or retries happen. The workflow runs on
the object's scheduler and alarm (`Durable` builds them), the same on Cloudflare and
under `durability serve`.
"""

import json
from urllib.parse import parse_qs, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import Durable, workflow

DAY_MS = 24 * 60 * 60 * 1000


class Onboarding(Durable, DurableObject):
    """One user: their drip workflow and the emails it sent."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS outbox (step TEXT PRIMARY KEY, subject TEXT NOT NULL)"
        )

    def _send(self, step, subject):
        self.ctx.storage.sql.exec("INSERT INTO outbox (step, subject) VALUES (?, ?)", step, subject)
        return subject

    @workflow
    async def drip(self, event, step):
        """Welcome, tips, then a congratulation or a nudge, then a check-in."""
        user = event.payload["user"]
        interval = event.payload.get("interval_ms", DAY_MS)

        @step.do()
        def welcome():
            return self._send("welcome", f"Welcome aboard, {user}!")

        await welcome()
        await step.sleep("before tips", interval)

        @step.do()
        def tips():
            return self._send("tips", "Three tips to get started")

        await tips()
        try:
            await step.wait_for_event("activation", "activated", timeout=3 * interval)
            activated = True
        except Exception:
            activated = False

        @step.do()
        def follow_up():
            if activated:
                return self._send("follow_up", "Congratulations on activating!")
            return self._send("follow_up", "Need a hand getting started?")

        await follow_up()
        await step.sleep("before check-in", 3 * interval)

        @step.do()
        def check_in():
            return self._send("check_in", "How is it going?")

        await check_in()
        return {"user": user, "activated": activated}

    async def sign_up(self, user, interval_ms):
        """Start the drip (once per user); False when it was started before."""
        try:
            await self.drip.create(id=user, params={"user": user, "interval_ms": interval_ms})
        except Exception:
            return False
        return True

    async def activate(self, user):
        """The user activated their account: the drip hears it. False for an unknown user."""
        try:
            instance = await self.drip.get(user)
        except Exception:
            return False
        await instance.send_event(type="activated", payload={"user": user})
        return True

    async def state(self, user):
        """The drip's status and the emails sent so far, oldest first (None: no drip)."""
        try:
            instance = await self.drip.get(user)
        except Exception:
            return None
        status = await instance.status()
        emails = [
            row.subject
            for row in self.ctx.storage.sql.exec("SELECT subject FROM outbox ORDER BY rowid")
        ]
        return {"status": status["status"], "output": status["output"], "emails": emails}


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    """`POST /{user}/signup[?interval=SECONDS]`, `POST /{user}/activate`, `GET /{user}`."""

    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        if not parts:
            return Response("Expected POST /{user}/(signup|activate) or GET /{user}", status=404)
        user = parts[0]
        stub = self.env.USERS.getByName(user)
        match request.method, parts[1:]:
            case "POST", ["signup"]:
                interval = parse_qs(url.query).get("interval", [""])[-1]
                if interval and not (
                    interval.isascii() and interval.isdigit() and int(interval) > 0
                ):
                    return Response("interval must be a positive number of seconds", status=400)
                interval_ms = int(interval) * 1000 if interval else DAY_MS
                if not await stub.sign_up(user, interval_ms):
                    return Response("already signed up", status=409)
                return json_response({"user": user}, 202)
            case "POST", ["activate"]:
                if not await stub.activate(user):
                    return Response("no such user", status=404)
                return json_response({"user": user}, 202)
            case "GET", []:
                state = await stub.state(user)
                if state is None:
                    return Response("no such user", status=404)
                return json_response(state)
        return Response("Not found", status=404)
