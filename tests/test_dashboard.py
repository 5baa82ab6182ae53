"""The dashboard at `/_durability`: what it shows, its escaping, its routes, and
`POST /_durability/advance` on a server running on virtual time."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from _served import call, served
from conftest import START_MS, MakeRuntime
from durability.cli._dashboard.app import MAX_ADVANCE_MS
from durability.cli._dashboard.html import relative_time
from durability.cli._dashboard.render import OBJECT_CARDS, Snapshot, render_panel
from durability.cli._dashboard.reports import ReportCache
from durability.cli._inspect import inspect_path
from durability.cli._inspect_command import render
from durability.runtime import DurableObject, Request, Response, Runtime
from durability.runtime.server import WorkerApp, WorkerModule, load_worker
from durability.testing import VirtualClock
from test_inspect import Fanout
from test_inspect import Shop as FilledShop

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "_dashboard_worker.py"
RENEWALS = ROOT / "examples" / "subscription_renewals"
DAY_MS = 86_400_000
PANEL_TAGS = {
    "a", "article", "code", "dd", "details", "div", "dl", "dt", "h2", "h3", "h4", "header",
    "p", "pre", "section", "span", "summary", "table", "tbody", "td", "th", "thead", "time",
    "tr",
}  # fmt: skip
"""Every element the panel is built of: anything else came from stored data."""


@pytest.fixture
async def shops(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the dashboard worker, served from `tmp_path/data` on the virtual clock."""
    worker = load_worker(str(WORKER))
    async with make_runtime(path=tmp_path / "data", bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
            yield client


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)


def _tags(html: str) -> set[str]:
    parser = _Tags()
    parser.feed(html)
    return parser.names


async def test_page_shows_objects_work_alarms_log_and_failures(
    shops: httpx.AsyncClient,
) -> None:
    """The page lists each object by name with its operations by status, named alarms,
    log cursor and lag, and the failures with their stored error and traceback."""
    assert (await shops.post("/acme/order/inv-1")).status_code == 201
    assert (await shops.post("/_durability/advance?ms=60000")).status_code == 200
    page = await shops.get("/_durability")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "script-src 'self'" in page.headers["content-security-policy"]
    html = page.text
    for shown in (
        "SHOPS",
        "acme",
        '<span class="status failed">failed</span> 1',
        '<span class="status pending">pending</span> 1',
        "renew",
        "mailer",
        '<span class="lag">1</span>',
        "RuntimeError: card &lt;b&gt;declined&lt;/b&gt; for inv-1",
        "ConnectionError: courier offline",
        "Traceback (most recent call last)",
        "/_durability/assets/dashboard.js",
    ):
        assert shown in html, shown
    assert "<b>" not in html
    assert (await shops.get("/_durability/")).text.count("acme") == html.count("acme")


async def test_leases_fanout_and_failing_alarms_show_too(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """A held log lease, fanout backlog and dead letters, and a named alarm whose attempts
    fail (among the recent failures) are on the page as well."""

    async def fetch(request: Request, env: Any) -> Response:
        return Response("worker")

    bindings = {"SHOPS": FilledShop, "FANOUT": Fanout}
    async with make_runtime(path=tmp_path, bindings=bindings) as runtime:
        await runtime.env.SHOPS.get_by_name("acme").fill()
        await runtime.env.FANOUT.get_by_name("topic").seed()
        await clock.advance(60_000)
        app = WorkerApp(WorkerModule(name="inline", fetch=fetch, bindings={}), runtime)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            panel = (await client.get("/_durability/api/panel")).text
    failures = panel[panel.index('id="failures"') : panel.index('class="namespace"')]
    assert "named alarm" in failures
    assert "LookupError: nothing to sweep" in failures
    for shown in (
        "Leased by",
        "<code>indexer</code>",
        "backlog 1 · dead letters 1",
        "<code>target-d2</code>",
        "TargetError: gone",
        '<div class="total bad"><dt>dead letters</dt><dd>1</dd></div>',
    ):
        assert shown in panel, shown


async def test_stored_strings_never_become_markup(shops: httpx.AsyncClient) -> None:
    """Object names, ids and errors holding HTML are shown as text, never as elements."""
    name = "%3Cscript%3Ealert(1)%3C%2Fscript%3E"
    invoice = "%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"
    assert (await shops.post(f"/{name}/order/{invoice}")).status_code == 201
    await shops.post("/_durability/advance?ms=60000")
    panel = (await shops.get("/_durability/api/panel")).text
    assert _tags(panel) <= PANEL_TAGS
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in panel
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in panel


async def test_objects_endpoint_is_the_inspect_report(
    shops: httpx.AsyncClient, tmp_path: Path, clock: VirtualClock
) -> None:
    """`/_durability/api/objects` is the `inspect --json` report with the runtime's time."""
    await shops.post("/acme/order/inv-1")
    await clock.run_until_idle()
    response = await shops.get("/_durability/api/objects")
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["objects"] == inspect_path(tmp_path / "data")
    assert (body["now_ms"], body["virtual_time"], body["error"]) == (clock.now_ms(), True, None)
    assert body["path"] == str(tmp_path / "data")


async def test_dashboard_paths_never_reach_the_worker(tmp_path: Path) -> None:
    """Paths under /_durability are the dashboard's (404 when unknown); others the worker's."""
    seen: list[str] = []

    async def fetch(request: Request, env: Any) -> Response:
        seen.append(request.url)
        return Response("worker")

    async with Runtime(path=tmp_path) as runtime:
        app = WorkerApp(WorkerModule(name="inline", fetch=fetch, bindings={}), runtime)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            unknown = await client.get("/_durability/nothing-here")
            assets = [
                await client.get(f"/_durability/assets/{name}")
                for name in ("dashboard.css", "dashboard.js", "favicon.svg", "page.html")
            ]
            outside = await client.get("/_durabilityx")
    assert unknown.status_code == 404
    assert [asset.status_code for asset in assets] == [200, 200, 200, 404]
    assert [asset.headers["content-type"].split(";")[0] for asset in assets[:3]] == [
        "text/css",
        "text/javascript",
        "image/svg+xml",
    ]
    assert "/_durability/api/panel" in assets[1].text
    assert (outside.text, seen) == ("worker", ["http://t/_durabilityx"])


async def test_wrong_methods_are_405(shops: httpx.AsyncClient) -> None:
    """The views answer GET only and `advance` POST only, saying which in `Allow`."""
    post = await shops.post("/_durability/api/objects")
    get = await shops.get("/_durability/advance?ms=1")
    assert (post.status_code, post.headers["allow"]) == (405, "GET")
    assert (get.status_code, get.headers["allow"]) == (405, "POST")


async def test_advance_moves_virtual_time_and_runs_what_comes_due(
    shops: httpx.AsyncClient, clock: VirtualClock
) -> None:
    """`POST /_durability/advance?ms=N` moves the clock N ms on, running the due retries."""
    await shops.post("/acme/order/inv-1")
    response = await shops.post("/_durability/advance?ms=60000")
    assert response.json() == {"advanced_ms": 60_000, "now_ms": START_MS + 60_000}
    assert clock.now_ms() == START_MS + 60_000
    (shop,) = (await shops.get("/_durability/api/objects")).json()["objects"]
    assert shop["operations"] == {"failed": 1, "pending": 1}


@pytest.mark.parametrize(
    "query",
    ["", "ms=", "ms=-1", "ms=1.5", "ms=1e3", "ms=abc", "ms=1&ms=2", f"ms={MAX_ADVANCE_MS + 1}"],
)
async def test_advance_rejects_a_bad_ms(
    shops: httpx.AsyncClient, clock: VirtualClock, query: str
) -> None:
    """A missing, repeated, non-integer, negative or too large `ms` is a 400; time stays."""
    response = await shops.post(f"/_durability/advance?{query}")
    assert response.status_code == 400
    assert response.json()["error"].startswith(f"ms must be one integer from 0 to {MAX_ADVANCE_MS}")
    assert clock.now_ms() == START_MS


async def test_advance_on_the_wall_clock_is_409(tmp_path: Path) -> None:
    """Without a virtual clock there is no time to move: 409, saying to use --virtual-time."""
    worker = load_worker(str(WORKER))
    async with Runtime(path=tmp_path, bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.post("/_durability/advance?ms=1000")
            state = (await client.get("/_durability/api/objects")).json()
    assert response.status_code == 409
    assert "--virtual-time" in response.json()["error"]
    assert state["virtual_time"] is False


async def test_an_in_memory_runtime_has_nothing_to_show(make_runtime: MakeRuntime) -> None:
    """A runtime without a path shows why the page is empty instead of failing."""
    worker = load_worker(str(WORKER))
    async with make_runtime(bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            page = await client.get("/_durability")
    assert page.status_code == 200
    assert "in-memory runtime: nothing on disk" in page.text


def test_many_objects_are_counted_and_the_first_ones_shown() -> None:
    """Past OBJECT_CARDS objects the summary still counts all; the rest are named by count."""
    reports: list[dict[str, Any]] = [
        {
            "namespace": "SHOPS",
            "name": f"shop-{n:04d}",
            "id": f"{n:064x}",
            "size_bytes": 4096,
            "alarm_at": None,
            "operations": {"pending": 1},
            "operation_details": [],
            "named_alarms": [],
            "log": None,
            "fanout": None,
        }
        for n in range(OBJECT_CARDS + 3)
    ]
    panel = render_panel(Snapshot(START_MS, False, "data", reports))
    assert f"<dd>{OBJECT_CARDS + 3}</dd>" in panel
    assert panel.count('<article class="object"') == OBJECT_CARDS
    assert f"shop-{OBJECT_CARDS - 1:04d}" in panel
    assert f"shop-{OBJECT_CARDS:04d}" not in panel
    assert "3 more objects not shown here" in panel


@pytest.mark.parametrize(
    ("delta_ms", "shown"),
    [
        (0, "now"),
        (999, "now"),
        (5_000, "in 5 s"),
        (-61_000, "1 min 1 s ago"),
        (3_600_000 + 120_000 + 5_000, "in 1 h 2 min"),
        (30 * DAY_MS - 60_000, "in 29 d 23 h"),
        (2 * DAY_MS + 30_000, "in 2 d"),
    ],
)
def test_relative_times_show_the_two_largest_units(delta_ms: int, shown: str) -> None:
    """Times read as `in 1 h 2 min` or `1 min 1 s ago`: the two largest units, no zeros."""
    assert relative_time(delta_ms) == shown


@pytest.mark.slow
def test_virtual_time_over_http_runs_a_month_of_renewals(tmp_path: Path) -> None:
    """`durability serve --virtual-time`: one advance of 30 days over HTTP renews (and
    charges) a subscription, and the dashboard's clock moved with it."""
    with served(RENEWALS, tmp_path / "data", "--virtual-time") as base:
        status, subscribed = call("POST", f"{base}/alice/subscribe")
        assert status == 201
        assert call("GET", f"{base}/alice/charges") == (200, [])
        start = call("GET", f"{base}/_durability/api/objects")[1]["now_ms"]
        status, advanced = call("POST", f"{base}/_durability/advance?ms={30 * DAY_MS + 60_000}")
        assert (status, advanced["now_ms"]) == (200, start + 30 * DAY_MS + 60_000)
        status, charges = call("GET", f"{base}/alice/charges")
        assert (status, len(charges)) == (200, 1)
        state = call("GET", f"{base}/_durability/api/objects")[1]
    assert subscribed["next_renewal_at"] <= start + 30 * DAY_MS
    assert state["virtual_time"] is True
    assert state["now_ms"] == advanced["now_ms"]
    (subscription,) = [o for o in state["objects"] if o["namespace"] == "SUBSCRIPTIONS"]
    (renew,) = subscription["named_alarms"]
    assert renew["scheduled_at"] == subscribed["next_renewal_at"] + 30 * DAY_MS


def _age(directory: Path, seconds: float) -> None:
    """Set every object file's times `seconds` into the past (a file left alone since)."""
    then = time.time() - seconds
    for file in directory.rglob("*.sqlite3*"):
        os.utime(file, (then, then))


async def test_refreshes_read_again_only_the_files_that_changed(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """An unchanged file's report is reused; a written or just-touched one is read again."""
    data = tmp_path / "data"
    async with make_runtime(path=data, bindings={"SHOPS": FilledShop}) as runtime:
        for name in ("acme", "globex", "initech"):
            await runtime.env.SHOPS.get_by_name(name).fill()
        await clock.run_until_idle()
        cache = ReportCache(data)
        first = cache.reports()
        assert cache.reads == 3 and first == inspect_path(data)
        assert cache.reports() == first and cache.reads == 6, "fresh files are read again"
        _age(data, 10)
        cache.reports()
        assert cache.reads == 9, "times changed: every signature differs"
        assert cache.reports() == first and cache.reads == 9, "nothing changed: nothing read"
        await runtime.env.SHOPS.get_by_name("globex").fill()
        await clock.run_until_idle()
        changed = cache.reports()
        assert cache.reads == 10 and changed == inspect_path(data)
        assert changed != first


class Notebook(DurableObject):
    """Keeps its data in its own SQL table and in KV, and nothing else."""

    async def write(self) -> None:
        self.ctx.storage.sql.exec("CREATE TABLE notes (text TEXT)")
        self.ctx.storage.sql.exec("INSERT INTO notes VALUES ('a'), ('b'), ('c')")
        await self.ctx.storage.put("owner", "ada")

    async def touch(self) -> None:
        """Writes and takes back one KV key: a file with its name, and no data of its own."""
        await self.ctx.storage.put("owner", "ada")
        await self.ctx.storage.delete("owner")


async def test_objects_holding_their_own_tables_and_kv_are_not_shown_empty(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """An object with SQL rows and KV keys shows them counted, not "Nothing stored yet."."""
    data = tmp_path / "data"
    async with make_runtime(path=data, bindings={"NOTES": Notebook}) as rt:
        await rt.env.NOTES.get_by_name("full").write()
        await rt.env.NOTES.get_by_name("empty").touch()
    reports = {report["name"]: report for report in inspect_path(data)}
    assert reports["full"]["storage"] == {"tables": {"notes": 3}, "kv_keys": 1}
    assert reports["empty"]["storage"] == {"tables": {}, "kv_keys": 0}
    panel = render_panel(Snapshot(clock.now_ms(), True, "data", list(reports.values())))
    full, empty = (panel[panel.index(f">{name}<") :] for name in ("full", "empty"))
    assert "Nothing stored yet." not in full[: full.index("</article>")]
    assert "notes: 3 rows · KV: 1 key" in full[: full.index("</article>")]
    assert "Nothing stored yet." in empty[: empty.index("</article>")]
    assert "  storage: table notes 3 rows, KV 1 key" in render(inspect_path(data, "NOTES", "full"))


async def test_work_due_before_the_alarm_shows_as_the_next_wake_up(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """A renewal due within the minimum alarm delay runs from a timer while the alarm waits
    later: the object's line shows the renewal's time, not the later alarm's."""
    worker = load_worker(str(RENEWALS))
    data = tmp_path / "data"
    async with make_runtime(path=data, bindings=worker.bindings) as rt:
        request = Request("http://x/carol/subscribe?period=6", method="POST")
        assert (await worker.fetch(request, rt.env)).status == 201
        await clock.advance(5_500)
        (report,) = [r for r in inspect_path(data) if r["namespace"] == "SUBSCRIPTIONS"]
        panel = render_panel(Snapshot(clock.now_ms(), True, "data", [report]))
    (renewal,) = report["named_alarms"]
    assert renewal["next_attempt_at"] == START_MS + 6_000
    assert report["alarm_at"] == START_MS + 15_000  # the safety net, later
    assert "next wake-up" in panel and "in 9 s" not in panel
    assert panel.count('<span class="rel">now</span>') == 3  # wake-up, scheduled, next attempt
