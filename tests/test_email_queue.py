"""The email queue example on a virtual clock: file-backed archive and DLQ, a scripted mailer."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import Request, Runtime
from durability.runtime.server import WorkerModule, load_worker
from durability.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "email_queue"
DAY_MS = 24 * 60 * 60 * 1000


@dataclass
class FakeMailer:
    """Bound as MAILER: answers each send with the next status of `script` (then 202),
    and records every (idempotency key, address) it was asked to send."""

    script: list[int] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def getByName(self, name: str) -> FakeMailer:
        return self

    async def send_email(self, idempotency_key: str, email: dict[str, Any]) -> dict[str, int]:
        self.calls.append((idempotency_key, email["to"]))
        return {"status": self.script.pop(0) if self.script else 202}


@dataclass
class Queue:
    """The example served by a file-backed runtime on a virtual clock."""

    worker: WorkerModule
    rt: Runtime
    clock: VirtualClock
    module: Any
    storage: Path
    mailer: FakeMailer

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        text = None if body is None else json.dumps(body)
        response = await self.worker.fetch(
            Request(f"http://queue{path}", method=method, body=text), self.rt.env
        )
        raw = await response.text()
        is_json = response.headers.get("content-type") == "application/json"
        return response.status, json.loads(raw) if is_json else raw

    async def send(self, emails: list[dict[str, Any]], query: str = "") -> Any:
        status, body = await self.request("POST", f"/emails{query}", emails)
        assert status == 202, body
        return body

    def files(self, prefix: str) -> list[dict[str, Any]]:
        """The JSON entries the file store holds under `prefix`, by message id."""
        entries = [
            json.loads(path.read_text())
            for path in sorted(self.storage.iterdir())
            if path.name.startswith(prefix.replace("/", "%2F"))
        ]
        return sorted(entries, key=lambda entry: entry["messageId"])


@pytest.fixture
async def queue(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> AsyncIterator[Queue]:
    worker = load_worker(str(EXAMPLE))
    mailer = FakeMailer()
    storage = tmp_path / "storage"
    bindings = {**worker.bindings, "MAILER": mailer, "STORAGE_DIR": str(storage)}
    async with make_runtime(path=str(tmp_path / "db"), bindings=bindings) as rt:
        yield Queue(worker, rt, clock, sys.modules[worker.name], storage, mailer)


def email(number: int, customer: str = "alice", to: str = "ada@example.com") -> dict[str, Any]:
    return {"id": f"m{number}", "customerId": customer, "to": to}


async def test_each_email_is_sent_and_archived_once(queue: Queue) -> None:
    """Every message is sent under its id and archived to a file; then the queue is empty."""
    await queue.send([email(1), email(2, to="bo@example.com")])
    await queue.clock.advance(1_000)
    archive = queue.files("email-archive/")
    pending = await queue.rt.env.QUEUES.get_by_name("customer-alice").pending()
    assert queue.mailer.calls == [("m1", "ada@example.com"), ("m2", "bo@example.com")]
    assert [(entry["messageId"], entry["target"]) for entry in archive] == [
        ("m1", "archive"),
        ("m2", "archive"),
    ]
    assert pending == 0


async def test_pushes_go_to_the_lane_or_the_customer_shard(queue: Queue) -> None:
    """Without a lane, one push per customer to `customer-<id>`; with one, all to the lane."""
    by_customer = await queue.send([email(1), email(2, "bob"), email(3)])
    in_lane = await queue.send([email(4), email(5, "bob")], "?lane=vip")
    assert [(push["shard"], push["value"]) for push in by_customer] == [
        ("customer-alice", ["m1", "m3"]),
        ("customer-bob", ["m2"]),
    ]
    assert [(push["shard"], push["value"]) for push in in_lane] == [("vip", ["m4", "m5"])]
    assert sorted(queue.module.queues.observations()) == ["customer-alice", "customer-bob", "vip"]


async def test_a_400_is_dead_lettered_to_a_file_for_the_email_target_only(queue: Queue) -> None:
    """A 400 dead-letters the email delivery at once (one call); the archive still has it."""
    queue.mailer.script = [400]
    await queue.send([email(1, to="nobody")])
    await queue.clock.advance(1_000)
    [dead] = queue.files("email-dlq/")
    assert len(queue.mailer.calls) == 1
    assert (dead["messageId"], dead["target"], dead["attempts"]) == ("m1", "email", 1)
    assert dead["failure"] == {"reason": "explicit", "error": None}
    assert [entry["messageId"] for entry in queue.files("email-archive/")] == ["m1"]


async def test_a_429_waits_thirty_seconds(queue: Queue) -> None:
    """A rate-limited send is retried after 30 s, not sooner."""
    queue.mailer.script = [429]
    await queue.send([email(1)])
    await queue.clock.advance(29_000)
    before = len(queue.mailer.calls)
    await queue.clock.advance(1_500)
    assert before == 1
    assert len(queue.mailer.calls) == 2
    assert queue.files("email-dlq/") == []


async def test_exhausted_then_redriven_under_the_same_key(queue: Queue) -> None:
    """Five failed sends dead-letter the email; the redrive sends it again with the same
    idempotency key, removes the file, and leaves the archive alone."""
    queue.mailer.script = [503] * 5
    await queue.send([email(1)])
    await queue.clock.advance(10 * 60_000)
    [dead] = queue.files("email-dlq/")
    status, redriven = await queue.request("POST", "/dlq/redrive")
    await queue.clock.advance(1_000)
    assert dead["failure"]["reason"] == "exhausted"
    assert dead["attempts"] == 5
    assert (status, redriven) == (200, {"redriven": 1})
    assert queue.mailer.calls == [("m1", "ada@example.com")] * 6
    assert queue.files("email-dlq/") == []
    assert len(queue.files("email-archive/")) == 1


async def test_redrive_skips_old_dead_letters_and_those_before_after(queue: Queue) -> None:
    """Dead letters over 30 days old, or stored before `after`, stay where they are."""
    queue.mailer.script = [400, 400]
    await queue.send([email(1)])
    await queue.clock.advance(31 * DAY_MS)
    await queue.send([email(2, "bob")])
    await queue.clock.advance(1_000)
    [_, recent] = sorted(queue.files("email-dlq/"), key=lambda entry: entry["storedAt"])
    after = recent["storedAt"] + 1
    none = await queue.request("POST", f"/dlq/redrive?after={after}")
    some = await queue.request("POST", "/dlq/redrive")
    await queue.clock.advance(1_000)
    assert none == (200, {"redriven": 0})
    assert some == (200, {"redriven": 1})
    assert [entry["messageId"] for entry in queue.files("email-dlq/")] == ["m1"]
    assert queue.mailer.calls[-1] == ("m2", "ada@example.com")


async def test_bad_requests(queue: Queue) -> None:
    """Emails without a customer answer 400; unknown routes answer 404 with the usage."""
    assert (await queue.request("POST", "/emails", [{"to": "a@b"}]))[0] == 400
    assert (await queue.request("POST", "/emails", {"not": "a list"}))[0] == 400
    status, body = await queue.request("GET", "/nope")
    assert status == 404
    assert "POST /emails" in body


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/dlq/redrive?after=abc", None, "after must be a whole number of ms from 0 to"),
        ("/dlq/redrive?after=-1", None, "after must be a whole number of ms from 0 to"),
        ("/dlq/redrive?after=", None, "after must be a whole number of ms from 0 to"),
        ("/dlq/redrive?after=99999999999999999999", None, "after must be a whole number"),
        ("/emails?lane=", [email(1)], "lane must not be empty when given"),
        ("/emails", [{**email(1), "fail": "abc"}], "email 0: fail must be a whole number"),
        ("/emails", [email(1), {**email(2), "fail": -1}], "email 1: fail must be a whole"),
        ("/emails", [{**email(1), "fail": True}], "email 0: fail must be a whole number"),
        ("/emails", [{"customerId": "c", "to": 5}], "email 0: to must be a string"),
        ("/emails", [{**email(1), "id": 7}], "email 0: id must be a string when given"),
    ],
)
async def test_bad_parameters_answer_400_naming_them(
    queue: Queue, path: str, body: Any, message: str
) -> None:
    """A bad query parameter or email field answers 400 naming it, and nothing is queued."""
    status, text = await queue.request("POST", path, body)
    assert status == 400
    assert message in text
    await queue.clock.advance(60_000)
    assert queue.mailer.calls == []
    assert await queue.rt.env.QUEUES.get_by_name("customer-alice").pending() == 0


async def test_a_wrong_method_answers_405_with_the_allowed_one(queue: Queue) -> None:
    """A known route asked with the wrong method answers 405 and names the right one."""
    for method, path, allowed in [
        ("GET", "/emails", "POST"),
        ("GET", "/dlq/redrive", "POST"),
        ("POST", "/queues/customer-alice", "GET"),
        ("DELETE", "/archive", "GET"),
        ("POST", "/dlq", "GET"),
        ("PUT", "/mailer/ada@example.com", "GET"),
    ]:
        response = await queue.worker.fetch(
            Request(f"http://queue{path}", method=method), queue.rt.env
        )
        assert (response.status, response.headers.get("allow")) == (405, allowed), path


@pytest.mark.parametrize("kind", ["file", "object"])
async def test_both_stores_keep_the_first_write_and_page_by_key(
    kind: str, tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """FileStore and the Store object refuse to overwrite a key, list a prefix in key order
    after a cursor, and delete."""
    module = sys.modules[load_worker(str(EXAMPLE)).name]
    async with make_runtime(bindings={"STORE": module.Store}) as rt:
        stores = sys.modules["email_stores"]
        store = (
            stores.FileStore(tmp_path / "files")
            if kind == "file"
            else rt.env.STORE.get_by_name("email")
        )
        first = await store.put("dlq/b", {"n": 1})
        again = await store.put("dlq/b", {"n": 2})
        await store.put("dlq/a", {"n": 0})
        await store.put("other/c", {"n": 3})
        listed = await store.list("dlq/")
        paged = await store.list("dlq/", "dlq/a", 1)
        deleted = [await store.delete("dlq/a"), await store.delete("dlq/a")]
        value = await store.get("dlq/b")
    assert (first, again, value) == (True, False, {"n": 1})
    assert listed == [{"key": "dlq/a", "value": {"n": 0}}, {"key": "dlq/b", "value": {"n": 1}}]
    assert paged == [{"key": "dlq/b", "value": {"n": 1}}]
    assert deleted == [True, False]
