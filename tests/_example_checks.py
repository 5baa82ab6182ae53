"""End-to-end HTTP checks of the examples, the same on every host.

`tests/test_examples_http.py` runs them against `durability serve examples/<name>`,
and `scripts/workerd-smoke` against the same project on a real workerd. Standard
library only, so the smoke script runs them with any Python (the chat room's check,
which needs a WebSocket client, imports `websocket-client` when it runs). Every check uses names
of its own (a fresh token per run), so storage left by an earlier run cannot matter.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

ALARM_WAIT_S = 30.0
"""How long a check waits (polling) for alarms due within seconds to have fired."""


def request(base_url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """`(status, body)`: the body parsed when the response says it is JSON, else text."""
    data = None if body is None else json.dumps(body).encode()
    call = urllib.request.Request(base_url + path, data=data, method=method)
    try:
        with urllib.request.urlopen(call, timeout=60) as response:
            return response.status, _body(response)
    except urllib.error.HTTPError as error:
        return error.code, _body(error)


def _body(response: Any) -> Any:
    text = response.read().decode()
    is_json = response.headers.get("content-type", "").startswith("application/json")
    return json.loads(text) if is_json else text


def _expect(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def _token() -> str:
    return uuid.uuid4().hex[:8]


def check_counter(base_url: str) -> None:
    """Counts per name, arms and cancels the reset alarm, and the alarm really fires."""
    apples, pears = f"apples-{_token()}", f"pears-{_token()}"
    status, usage = request(base_url, "GET", "/")
    _expect((status, "increment" in usage), (200, True), "GET / shows the usage")
    for value in (1, 2):
        _, state = request(base_url, "POST", f"/{apples}/increment")
        _expect(state["value"], value, "increment")
    _, other = request(base_url, "POST", f"/{pears}/increment")
    _expect(other["value"], 1, "another name counts on its own")
    _, state = request(base_url, "GET", f"/{apples}")
    _expect(state, {"name": apples, "value": 2, "reset_at_ms": None}, "GET /NAME")
    _, armed = request(base_url, "POST", f"/{apples}/reset-in/3600")
    if not isinstance(armed["reset_at_ms"], int) or armed["reset_at_ms"] <= 0:
        raise AssertionError(f"reset-in: expected an alarm time in ms, got {armed!r}")
    _, state = request(base_url, "GET", f"/{apples}")
    _expect(state["reset_at_ms"], armed["reset_at_ms"], "the armed alarm reads back")
    _, cancelled = request(base_url, "POST", f"/{apples}/cancel-reset")
    _expect(cancelled, {"name": apples, "value": 2, "reset_at_ms": None}, "cancel-reset")
    status, _ = request(base_url, "GET", f"/{apples}/nope")
    _expect(status, 404, "an unknown route")
    _expect(request(base_url, "GET", f"/{apples}/increment")[0], 405, "GET on a POST route")
    request(base_url, "POST", f"/{apples}/reset-in/1")
    deadline = time.monotonic() + ALARM_WAIT_S
    while (state := request(base_url, "GET", f"/{apples}")[1])["value"] != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"the reset alarm did not fire within 30 s: {state!r}")
        time.sleep(0.2)
    _expect(state, {"name": apples, "value": 0, "reset_at_ms": None}, "after the alarm")


def check_subscription_renewals(base_url: str) -> None:
    """Subscribe answers 201 with the first renewal, GET shows it, cancel clears it, and
    a one-second trial charges once per period as its renewals fire."""
    customer = f"alice-{_token()}"
    status, subscribed = request(base_url, "POST", f"/{customer}/subscribe")
    _expect(status, 201, "subscribe")
    first = subscribed["next_renewal_at"]
    _expect(subscribed, {"subscribed": customer, "next_renewal_at": first}, "subscribe body")
    if not isinstance(first, int):
        raise AssertionError(f"next_renewal_at must be ms, got {first!r}")
    again = request(base_url, "POST", f"/{customer}/subscribe")[1]["next_renewal_at"]
    if again < first:
        raise AssertionError("subscribing again must move the renewal forward, not back")
    _, state = request(base_url, "GET", f"/{customer}")
    _expect(state, {"customer_id": customer, "next_renewal_at": again}, "GET /CUSTOMER")
    _expect(request(base_url, "POST", f"/{customer}/cancel"), (200, "cancelled"), "cancel")
    _, state = request(base_url, "GET", f"/{customer}")
    _expect(state, {"customer_id": None, "next_renewal_at": None}, "state after cancel")
    for method, path in (("POST", f"/{customer}/refund"), ("POST", "/"), ("GET", "/x/y")):
        _expect(request(base_url, method, path)[0], 404, f"{method} {path}")
    for period in ("0", "abc", "99999999999999999999999"):
        status, _ = request(base_url, "POST", f"/{customer}/subscribe?period={period}")
        _expect(status, 400, f"period={period}: not 1 s to ten years")
    _, state = request(base_url, "GET", f"/{customer}")
    _expect(state, {"customer_id": None, "next_renewal_at": None}, "nothing half-written")
    _expect(request(base_url, "GET", f"/{customer}/subscribe")[0], 405, "GET on a POST route")

    # A one-second trial: the renewals really fire, each charges the Payments object once.
    trial = f"trial-{_token()}"
    status, subscribed = request(base_url, "POST", f"/{trial}/subscribe?period=1")
    _expect(status, 201, "a trial subscription")
    first = subscribed["next_renewal_at"]
    deadline = time.monotonic() + ALARM_WAIT_S
    while len(charges := request(base_url, "GET", f"/{trial}/charges")[1]) < 3:
        if time.monotonic() > deadline:
            raise AssertionError(f"three renewals did not charge within 30 s: {charges!r}")
        time.sleep(0.2)
    expected = [first + 1000 * n for n in range(len(charges))]
    _expect(charges, expected, "one charge per period, each period once")
    _expect(request(base_url, "POST", f"/{trial}/cancel"), (200, "cancelled"), "cancel trial")


def check_event_topics(base_url: str) -> None:
    """Pushes land on the key's partition and report its load, events are handled once
    per group in key order, keys dedupe, poison is parked."""
    topic = f"orders-{_token()}"
    produced = [(f"user-{n % 5}", f"e{n}") for n in range(20)]
    events = [{"partitionKey": key, "payload": payload} for key, payload in produced]
    status, accepted = request(base_url, "POST", f"/{topic}/events?region=weur", events)
    _expect(status, 202, "produce")
    # FNV-1a of user-0 .. user-4 over 8 partitions: 1, 4, 3, 6, 5.
    _expect(sorted(accepted), ["1", "3", "4", "5", "6"], "the partitions the keys hash to")
    _expect(all(result["success"] for result in accepted.values()), True, "all accepted")
    offsets = {number: result["value"] for number, result in accepted.items()}
    _expect(offsets["1"], [0, 1, 2, 3], "user-0's four events, in order, on partition 1")
    loads = [result["load"]["outbound"]["pendingDeliveries"] for result in accepted.values()]
    _expect(loads, [0] * 5, "each push reports its partition's load")
    _, first = request(base_url, "POST", f"/{topic}/groups/billing/poll")
    handled = [event for lease in first for event in lease["events"]]
    _expect(sorted(e["payload"] for e in handled), sorted(p for _, p in produced), "poll")
    for key in {key for key, _ in produced}:
        mine = [e["payload"] for e in handled if e["partitionKey"] == key]
        _expect(mine, [p for k, p in produced if k == key], f"order of key {key}")
    _expect(request(base_url, "POST", f"/{topic}/groups/billing/poll"), (200, []), "re-poll")
    _, other = request(base_url, "POST", f"/{topic}/groups/search/poll")
    _expect(sum(len(lease["events"]) for lease in other), 20, "a second group reads all")
    _, partitions = request(base_url, "GET", f"/{topic}")
    _expect(sum(p["next_offset"] for p in partitions), 20, "offsets")
    for number, partition in enumerate(partitions):
        end = partition["next_offset"]
        expected = {
            "oldest_offset": 0,
            "hot_offset": 0,
            "next_offset": end,
            "cursors": {"billing": end, "search": end} if end else {},
            "backlog": 0,
            "parked": [],
        }
        _expect(partition, expected, f"partition {number} after both groups polled")

    keyed = [{"partitionKey": "alice", "payload": "paid", "key": "evt-1"}]
    once = request(base_url, "POST", f"/{topic}/events", keyed)[1]["1"]["value"]
    again = request(base_url, "POST", f"/{topic}/events", keyed)[1]["1"]["value"]
    _expect((once, again), ([4], [4]), "a repeated key returns its original offset")

    quarantine = f"{topic}-poison"
    request(base_url, "POST", f"/{quarantine}/events", [{"partitionKey": "z", "payload": "poison"}])
    for attempt in range(5):
        _, leased = request(base_url, "POST", f"/{quarantine}/groups/billing/poll?fail=poison")
        _expect(leased, [], f"attempt {attempt + 1} of a failing range")
    _, leased = request(base_url, "POST", f"/{quarantine}/groups/billing/poll")
    _expect(leased, [], "the range that failed five times is parked, not delivered")
    request(base_url, "POST", f"/{quarantine}/events", [{"partitionKey": "z", "payload": "fine"}])
    _, leased = request(base_url, "POST", f"/{quarantine}/groups/billing/poll")
    _expect([e["payload"] for lease in leased for e in lease["events"]], ["fine"], "moves on")
    _, partitions = request(base_url, "GET", f"/{quarantine}")
    idle = {"oldest_offset": 0, "hot_offset": 0, "next_offset": 0, "cursors": {}}
    poison = {"topic": quarantine, "partitionKey": "z", "payload": "poison"}
    parked = {"group": "billing", "first_offset": 0, "last_offset": 0, "events": [poison]}
    used = {"next_offset": 2, "cursors": {"billing": 2}, "parked": [parked]}
    parked_partitions = [
        {**idle, "backlog": 0, "parked": [], **(used if p["parked"] else {})} for p in partitions
    ]
    _expect(partitions, parked_partitions, "the failing range is parked after five attempts")

    _expect(request(base_url, "POST", f"/{topic}/events", {"not": "a list"})[0], 400, "bad body")
    status, body = request(base_url, "GET", f"/{topic}/groups")
    _expect((status, "POST /TOPIC/events" in body), (404, True), "an unknown route")


def check_rpc_transforms(base_url: str) -> None:
    """Context reaches the callee's metrics; retries absorb failures; a timeout is a 504."""
    name = f"counter-{_token()}"
    status, usage = request(base_url, "GET", "/")
    _expect((status, "increment" in usage), (200, True), "GET / shows the usage")
    status, first = request(base_url, "POST", f"/{name}/increment")
    _expect((status, first["value"], first["attempts"]), (200, 1, 1), "a plain increment")
    status, retried = request(base_url, "POST", f"/{name}/increment?fail=2")
    _expect((status, retried["value"], retried["attempts"]), (200, 2, 3), "two retries")
    status, failed = request(base_url, "POST", f"/{name}/increment?fail=5")
    _expect((status, "injected failure 3" in failed["error"]), (502, True), "retries exhausted")
    status, late = request(base_url, "POST", f"/{name}/increment?delay_ms=1500&timeout_ms=200")
    _expect((status, "timed out after 200ms" in late["error"]), (504, True), "the timeout")
    deadline = time.monotonic() + ALARM_WAIT_S
    while request(base_url, "GET", f"/{name}")[1]["value"] != 3:
        if time.monotonic() > deadline:
            raise AssertionError("the timed-out increment was never applied by the object")
        time.sleep(0.2)
    _, state = request(base_url, "GET", f"/{name}")
    seen = [
        (metric["requestId"], metric["outcome"])
        for metric in state["metrics"]
        if metric["method"] == "increment"
    ]
    _expect(seen[0], (first["requestId"], "ok"), "the callee saw the caller's request id")
    _expect(
        [outcome for request_id, outcome in seen if request_id == retried["requestId"]],
        ["error", "error", "ok"],
        "every attempt of the retried call is measured under one request id",
    )
    _expect((seen[-1][0], seen[-1][1]), (late["requestId"], "ok"), "the late call still finished")
    state_metrics = [metric for metric in state["metrics"] if metric["method"] == "state"]
    _expect(state_metrics[0]["requestId"], None, "a call without transforms has no context")


def _settled(base_url: str, path: str) -> Any:
    """The job GET `path` shows, once it is no longer pending (polling)."""
    deadline = time.monotonic() + ALARM_WAIT_S
    while (job := request(base_url, "GET", path)[1])["status"] == "pending":
        if time.monotonic() > deadline:
            raise AssertionError(f"the job did not settle within 30 s: {job!r}")
        time.sleep(0.2)
    return job


def check_image_jobs(base_url: str) -> None:
    """A resize job is registered once per size and completes; injected 503s are retried
    under one idempotency key (one image made); a bad width and an unreadable format fail
    at the first attempt without retries."""
    image = f"cat-{_token()}.jpg"
    status, usage = request(base_url, "GET", "/")
    _expect((status, "resize" in usage), (200, True), "GET / shows the usage")
    status, job = request(base_url, "POST", f"/{image}/resize?width=300")
    _expect((status, job), (202, {"job": f"resize:{image}:300"}), "register a job")
    _expect(request(base_url, "POST", f"/{image}/resize?width=300")[1], job, "again: same job")
    _expect(request(base_url, "POST", f"/{image}/resize?width=200&fail=2")[0], 202, "flaky")
    _expect(request(base_url, "POST", f"/{image}/resize?width=0")[0], 202, "a bad width")
    gif = f"cat-{_token()}.gif"
    _expect(request(base_url, "POST", f"/{gif}/resize?width=100")[0], 202, "a gif")
    _expect(request(base_url, "POST", f"/{image}/resize")[0], 400, "no width")

    done = _settled(base_url, f"/{image}/result?width=300")
    _expect(
        (done["status"], done["attempt"], done["image"]),
        ("completed", 1, f"resized/300/{image}"),
        "a job that went through",
    )
    flaky = _settled(base_url, f"/{image}/result?width=200")
    _expect((flaky["status"], flaky["attempt"]), ("completed", 3), "two 503s, then done")
    bad = _settled(base_url, f"/{image}/result?width=0")
    _expect(
        (bad["status"], bad["attempt"], bad["error"]["name"]),
        ("failed", 1, "InvalidWidth"),
        "a width out of range fails at once",
    )
    rejected = _settled(base_url, f"/{gif}/result?width=100")
    _expect(
        (rejected["status"], rejected["attempt"], rejected["error"]["name"]),
        ("failed", 1, "ResizeRejected"),
        "the service's 4xx fails at once",
    )
    upstream = [
        {"width": 200, "calls": 3, "image": f"resized/200/{image}"},
        {"width": 300, "calls": 1, "image": f"resized/300/{image}"},
    ]
    _expect(request(base_url, "GET", f"/{image}/upstream")[1], upstream, "one image per key")
    _expect(
        request(base_url, "GET", f"/{gif}/upstream")[1],
        [{"width": 100, "calls": 1, "image": None}],
        "the rejected format was asked once",
    )
    _expect(request(base_url, "GET", f"/{image}/nope")[0], 404, "an unknown route")


def _drained(base_url: str, shard: str) -> None:
    """Wait (polling) until the queue shard owes no deliveries."""
    deadline = time.monotonic() + ALARM_WAIT_S
    while (pending := request(base_url, "GET", f"/queues/{shard}")[1]) != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"{shard} still owes {pending!r} deliveries after 30 s")
        time.sleep(0.2)


def _dead_letters(base_url: str, token: str) -> list[tuple[str, str, str]]:
    """(message id, target, reason) of the dead letters of this run's messages."""
    entries = request(base_url, "GET", "/dlq")[1]
    return sorted(
        (e["messageId"], e["target"], e["failure"]["reason"])
        for e in entries
        if e["messageId"].endswith(token)
    )


def check_email_queue(base_url: str) -> None:
    """Emails route to their customer's or lane's shard; each is sent once per id and
    archived; a bad address and an exhausted delivery are dead-lettered for the email
    target only; a redrive delivers the exhausted one."""
    token = _token()
    alice, bob, carol = (f"{name}-{token}" for name in ("alice", "bob", "carol"))
    good, flaky, late = (f"{name}-{token}@example.com" for name in ("ada", "bo", "eve"))
    bad = f"nobody-{token}"  # no "@": the mailer answers 400
    emails = [
        {"id": f"m1-{token}", "customerId": alice, "to": good, "subject": "hello"},
        {"id": f"m2-{token}", "customerId": alice, "to": bad, "subject": "hello"},
        {"id": f"m3-{token}", "customerId": bob, "to": flaky, "fail": 2},
    ]
    status, pushed = request(base_url, "POST", "/emails", emails)
    _expect(status, 202, "produce")
    _expect(
        [(push["shard"], push["success"], push["value"]) for push in pushed],
        [
            (f"customer-{alice}", True, [f"m1-{token}", f"m2-{token}"]),
            (f"customer-{bob}", True, [f"m3-{token}"]),
        ],
        "one push per customer, to the customer's shard",
    )
    vip = [{"id": f"m4-{token}", "customerId": carol, "to": late, "fail": 6}]
    status, pushed = request(base_url, "POST", f"/emails?lane=vip-{token}", vip)
    _expect((status, [p["shard"] for p in pushed]), (202, [f"vip-{token}"]), "a lane")
    _drained(base_url, f"customer-{alice}")
    _drained(base_url, f"customer-{bob}")
    sends = {to: request(base_url, "GET", f"/mailer/{to}")[1] for to in (good, bad, flaky)}
    _expect(
        sends,
        {
            good: [{"key": f"m1-{token}", "calls": 1, "sent": True}],
            bad: [{"key": f"m2-{token}", "calls": 1, "sent": False}],
            flaky: [{"key": f"m3-{token}", "calls": 3, "sent": True}],
        },
        "each email sent once under its id; 503s retried; a 400 not",
    )
    _drained(base_url, f"vip-{token}")
    _, archive = request(base_url, "GET", "/archive")
    archived = sorted(e["messageId"] for e in archive if e["messageId"].endswith(token))
    expected = [f"m{n}-{token}" for n in range(1, 5)]
    _expect(archived, expected, "every message archived once, whatever its email did")
    _expect(
        _dead_letters(base_url, token),
        [(f"m2-{token}", "email", "explicit"), (f"m4-{token}", "email", "exhausted")],
        "dead letters, for the email target only",
    )
    _expect(
        request(base_url, "GET", f"/mailer/{late}")[1],
        [{"key": f"m4-{token}", "calls": 5, "sent": False}],
        "five attempts, then dead-lettered",
    )
    status, redriven = request(base_url, "POST", "/dlq/redrive")
    _expect((status, redriven["redriven"] >= 2), (200, True), "redrive")
    _drained(base_url, f"customer-{carol}")
    _drained(base_url, f"customer-{alice}")
    _expect(
        request(base_url, "GET", f"/mailer/{late}")[1],
        [{"key": f"m4-{token}", "calls": 7, "sent": True}],
        "the redriven email went out (one more 503 first), under the same key",
    )
    _expect(
        _dead_letters(base_url, token),
        [(f"m2-{token}", "email", "explicit")],
        "a bad address is dead-lettered again",
    )
    _, archive = request(base_url, "GET", "/archive")
    archived = sorted(e["messageId"] for e in archive if e["messageId"].endswith(token))
    _expect(archived, expected, "a redrive goes to the email target alone")
    _expect(request(base_url, "POST", "/emails", [{"to": good}])[0], 400, "no customerId")
    _expect(request(base_url, "GET", "/nope")[0], 404, "an unknown route")


def check_cron_digest(base_url: str) -> None:
    """Notes are added and shown pending with the title from `vars`; an empty note is
    refused. (Its schedule and static files are checked against `durability serve`
    alone, in test_wrangler_config.py: the workerd harness serves neither.)"""
    note = f"note-{_token()}"
    _expect(request(base_url, "POST", "/api/notes", {"text": note})[0], 201, "a note is added")
    status, shown = request(base_url, "GET", "/api/digest")
    _expect((status, shown["title"]), (200, "Notes digest"), "the title comes from vars")
    _expect(note in shown["pending"], True, "the note is pending")
    _expect(request(base_url, "POST", "/api/notes", {"text": " "})[0], 400, "an empty note")


def check_chat_room(base_url: str) -> None:
    """examples/chat_room over real WebSockets (see `_chat_checks`, which needs the
    `websocket-client` package, imported only when this check runs)."""
    from _chat_checks import check_chat_room as check

    check(base_url)


def _poll(base_url: str, path: str, done: Callable[[Any], bool], what: str) -> Any:
    """GET `path` every 0.2 s until `done(body)`; the body then (AssertionError after 30 s)."""
    deadline = time.monotonic() + ALARM_WAIT_S
    while True:
        status, body = request(base_url, "GET", path)
        if status == 200 and done(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within 30 s: last answer {status} {body!r}")
        time.sleep(0.2)


def check_order_fulfilment(base_url: str) -> None:
    """An order is charged, reserved, shipped and followed up; one not shipped in time is
    refunded and released; one out of stock errors after its refund."""
    token = _token()
    delivered, late, short = f"o-{token}", f"late-{token}", f"short-{token}"
    order = {"items": [f"mug-{token}"], "amount": 12, "ship_within": 60, "follow_up_after": 1}
    _expect(
        request(base_url, "POST", f"/orders/{delivered}", order), (202, {"id": delivered}), "create"
    )
    _expect(
        request(base_url, "POST", f"/orders/{delivered}", order)[0], 409, "an order id is used once"
    )
    _expect(request(base_url, "GET", f"/orders/nope-{token}")[0], 404, "an unknown order")
    _poll(
        base_url,
        f"/orders/{delivered}/activity",
        lambda body: len(body) == 2,
        "charged and reserved",
    )
    _expect(
        request(base_url, "POST", f"/orders/{delivered}/shipped", {"tracking": "T1"})[0],
        202,
        "shipped",
    )
    done = _poll(
        base_url, f"/orders/{delivered}", lambda body: body["status"] == "complete", "delivered"
    )
    _expect(
        done["output"], {"order": delivered, "outcome": "delivered", "tracking": "T1"}, "output"
    )
    activity = request(base_url, "GET", f"/orders/{delivered}/activity")[1]
    kinds = [kind for kind, _ in activity]
    _expect(kinds, ["charged", "reserved", "emailed"], "each effect once, in order")

    request(base_url, "POST", f"/orders/{late}", dict(order, ship_within=1))
    done = _poll(
        base_url, f"/orders/{late}", lambda body: body["status"] == "complete", "late order"
    )
    _expect(done["output"]["outcome"], "cancelled: not shipped in time", "late order outcome")
    kinds = [kind for kind, _ in request(base_url, "GET", f"/orders/{late}/activity")[1]]
    _expect(kinds, ["charged", "reserved", "released", "refunded"], "late order effects")

    request(base_url, "POST", f"/orders/{short}", dict(order, items=[f"rare-{token}"] * 4))
    done = _poll(
        base_url, f"/orders/{short}", lambda body: body["status"] == "errored", "short order"
    )
    _expect(done["error"], {"name": "NonRetryableError", "message": "out of stock"}, "short error")
    kinds = [kind for kind, _ in request(base_url, "GET", f"/orders/{short}/activity")[1]]
    _expect(kinds, ["charged", "refunded"], "short order effects")


def check_onboarding_drip(base_url: str) -> None:
    """A drip sends welcome and tips, hears the activation, congratulates, checks in; a
    user who never activates gets a nudge instead."""
    active, idle = f"ann-{_token()}", f"bob-{_token()}"
    _expect(request(base_url, "POST", f"/{active}/signup?interval=1")[0], 202, "signup")
    _expect(request(base_url, "POST", f"/{active}/signup?interval=1")[0], 409, "signup twice")
    _expect(request(base_url, "POST", f"/{idle}/signup?interval=1")[0], 202, "second signup")
    _expect(request(base_url, "POST", "/x/signup?interval=0")[0], 400, "a bad interval")
    _expect(request(base_url, "GET", f"/nobody-{_token()}")[0], 404, "an unknown user")
    _poll(base_url, f"/{active}", lambda body: len(body["emails"]) >= 2, "welcome and tips")
    _expect(request(base_url, "POST", f"/{active}/activate")[0], 202, "activate")
    done = _poll(base_url, f"/{active}", lambda body: body["status"] == "complete", "active drip")
    _expect(done["output"], {"user": active, "activated": True}, "active drip output")
    _expect(
        done["emails"],
        [
            f"Welcome aboard, {active}!",
            "Three tips to get started",
            "Congratulations on activating!",
            "How is it going?",
        ],
        "active drip emails",
    )
    done = _poll(base_url, f"/{idle}", lambda body: body["status"] == "complete", "idle drip")
    _expect(done["output"], {"user": idle, "activated": False}, "idle drip output")
    _expect(done["emails"][2], "Need a hand getting started?", "the nudge")


def check_report_workflow(base_url: str) -> None:
    """A report runs two steps in parallel, sleeps 2 s through the object's alarm, and
    finishes with the times its steps recorded."""
    report = f"report-{_token()}"
    _expect(request(base_url, "POST", f"/{report}"), (202, {"id": report}), "start")
    _expect(request(base_url, "POST", f"/{report}")[0], 409, "start twice")
    _expect(request(base_url, "GET", f"/missing-{_token()}")[0], 404, "an unknown report")
    done = _poll(base_url, f"/{report}", lambda body: body["status"] == "complete", "the report")
    output = done["output"]
    _expect(sorted(output), ["id", "preparedAt", "startedAt"], "report fields")
    _expect(output["id"], report, "report id")
    if not all(isinstance(output[key], int) for key in ("preparedAt", "startedAt")):
        raise AssertionError(f"step times must be ms: {output!r}")


SERVE_ONLY = frozenset({"order_fulfilment"})
"""Examples that need what the workerd harness does not run (Cloudflare Workflows)."""


CHECKS: dict[str, Callable[[str], None]] = {
    "counter": check_counter,
    "subscription_renewals": check_subscription_renewals,
    "event_topics": check_event_topics,
    "rpc_transforms": check_rpc_transforms,
    "image_jobs": check_image_jobs,
    "email_queue": check_email_queue,
    "chat_room": check_chat_room,
    "cron_digest": check_cron_digest,
    "order_fulfilment": check_order_fulfilment,
    "onboarding_drip": check_onboarding_drip,
    "report_workflow": check_report_workflow,
}
"""Example folder name -> its check, run against the served example's base URL."""
