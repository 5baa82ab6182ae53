"""`durability inspect` and the dashboard show workflow instances, steps, sleeps, events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _workflow_host import lab
from conftest import START_MS
from durability.cli._dashboard.render import Snapshot, render_panel
from durability.cli._inspect import inspect_path
from durability.cli._inspect_command import render

DAY_MS = 86_400_000


async def order(obj: Any, event: Any, step: Any) -> None:
    """A step that fails once, a day of sleep, then a wait for `paid`."""

    @step.do("charge")
    async def charge(ctx: Any) -> str:
        if ctx.attempt < 2:
            raise RuntimeError("gateway <down>")
        return "ok"

    await charge()
    await step.sleep("cool off", "1 day")
    await step.wait_for_event("payment", "paid")


async def broken(obj: Any, event: Any, step: Any) -> None:
    """A step that never succeeds."""

    @step.do("doomed", config={"retries": {"limit": 0, "delay": 0}})
    async def doomed() -> None:
        raise ValueError("<b>never</b>")

    await doomed()


async def _stored(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    async with lab(data) as world:
        await world.start(order, id="o1")
        await world.start(broken, id="o2")
        await world.clock.advance(10_000)
        await world.stub.send("o1", "early", {"x": 1})
    return data


async def test_inspect_reports_instances_steps_sleeps_and_events(tmp_path: Path) -> None:
    """The report lists each instance (errored first) with its runs, next run, steps
    (status, attempts, timings, errors) and the events kept for it."""
    data = await _stored(tmp_path)
    [report] = inspect_path(data)
    section = report["workflows"]
    assert section["counts"] == {"errored": 1, "waiting": 1}
    errored, waiting = section["instances"]
    assert (errored["instance_id"], errored["state"], errored["error_name"]) == (
        "o2",
        "errored",
        "WorkflowStepError",
    )
    assert waiting["next_run_at"] == START_MS + 10_000 + DAY_MS
    charge, sleep = waiting["steps"]
    assert (charge["name"], charge["status"], charge["attempt"]) == ("charge", "complete", 2)
    assert (charge["started_at"], charge["ended_at"]) == (START_MS, START_MS + 10_000)
    assert charge["error_name"] == "RuntimeError" and "gateway" in charge["error_stack"]
    assert (sleep["kind"], sleep["status"], sleep["wake_at"]) == (
        "sleep",
        "sleeping",
        START_MS + 10_000 + DAY_MS,
    )
    assert waiting["events"] == [{"type": "early", "sent_at": START_MS + 10_000}]
    text = render([report])
    assert "workflows: errored 1, waiting 1" in text
    assert "flow / o1: waiting, 2 runs, next run 2023-11-15 22:13:30.000Z" in text
    assert "events kept: early (2023-11-14 22:13:30.000Z)" in text


async def test_inspect_shows_the_awaited_event_of_a_wait(tmp_path: Path) -> None:
    """A wait in progress shows its event type and deadline."""
    data = tmp_path / "data"
    async with lab(data) as world:
        await world.start(order)
        await world.clock.advance(10_000 + DAY_MS)
    [report] = inspect_path(data)
    wait = report["workflows"]["instances"][0]["steps"][-1]
    assert (wait["kind"], wait["status"], wait["event_type"]) == ("wait", "waiting", "paid")
    assert wait["wake_at"] == START_MS + 10_000 + 2 * DAY_MS


async def test_dashboard_shows_workflows_and_their_failures_escaped(tmp_path: Path) -> None:
    """The panel counts instances, lists the errored one under recent failures, and
    shows steps with every stored string escaped."""
    data = await _stored(tmp_path)
    panel = render_panel(Snapshot(START_MS, True, str(data), inspect_path(data)))
    assert "workflow instances" in panel and "errored workflows" in panel
    assert "flow o2" in panel
    assert "&lt;b&gt;never&lt;/b&gt;" in panel and "<b>never</b>" not in panel
    assert "gateway &lt;down&gt;" in panel
    assert "cool off" in panel and "Events kept" in panel
