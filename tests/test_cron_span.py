"""Cron catch-up by counting days agrees with walking every missed slot one by one,
across daylight-saving changes, half-hour changes and a skipped date."""

from __future__ import annotations

import random
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from durability import Recurrence
from durability._alarms.recurrence import (
    MAX_CATCH_UP,
    RecurrenceSlot,
    catch_up,
    cron,
    first_cron_slot,
    next_slot,
)

pytestmark = pytest.mark.slow

DAY = 86_400_000
ZONES = (
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "Asia/Kolkata",
)
EXPRESSIONS = (
    ("* * * * *", 2),
    ("*/7 * * * *", 6),
    ("0 * * * *", 40),
    ("30 2 * * *", 300),
    ("0,30 1-3 * * *", 100),
    ("15 */5 * * 1-5", 100),
    ("0 9 L * *", 900),
    ("0 12 LW * *", 900),
    ("0 0 * * MON#2", 900),
    ("45 23 * * 0", 600),
    ("59 0 * * *", 300),
    ("0 0 * * *", 300),
)
"""Expressions, each with the most days a case spans (so the walk stays short)."""


def walked(
    recurrence: Recurrence, slot: RecurrenceSlot, now: int
) -> dict[str, tuple[RecurrenceSlot, bool]]:
    """What catch-up must return for each policy, found by stepping through every due slot."""
    due = [slot]
    following = next_slot(recurrence, slot)
    while following.at <= now:
        due.append(following)
        following = next_slot(recurrence, following)
    if len(due) == 1:
        return dict.fromkeys(("latest", "skip", "all"), (slot, True))
    return {
        "latest": (due[-1], True),
        "skip": (following, False),
        "all": (due[max(0, len(due) - MAX_CATCH_UP)], True),
    }


@pytest.mark.parametrize("zone", ZONES)
def test_counting_agrees_with_walking(zone: str) -> None:
    """For random spans of 2011-2027 (Apia skipped 2011-12-30), every expression and
    policy lands on the same slot, with the same occurrence number, as the walk."""
    chooser = random.Random(f"cron-span-{zone}")
    low = round(datetime(2011, 1, 1, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    high = round(datetime(2027, 1, 1, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    apia_gap = round(datetime(2011, 12, 29, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    for expression, max_days in EXPRESSIONS:
        for case in range(6):
            start = (
                apia_gap - chooser.randrange(2 * DAY) if case == 0 else chooser.randrange(low, high)
            )
            first = first_cron_slot(cron(expression, zone, "latest"), start)
            slot = RecurrenceSlot(first.at, chooser.randrange(1_000))
            now = slot.at + chooser.randrange(1, max_days * DAY)
            expected = walked(cron(expression, zone, "latest"), slot, now)
            for policy, outcome in expected.items():
                recurrence = cron(expression, zone, policy)
                assert catch_up(recurrence, slot, now) == outcome, (expression, zone, policy)


def test_all_past_a_thousand_starts_at_the_thousandth_from_the_end() -> None:
    """Twenty days of a minutely cron missed: "all" starts 999 slots before the latest."""
    recurrence = cron("* * * * *", "UTC", "all")
    start = round(datetime(2026, 10, 15, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    slot = RecurrenceSlot(start, 7)
    now = start + 20 * DAY + 59_999
    oldest, runs = catch_up(recurrence, slot, now)
    latest, _ = catch_up(cron("* * * * *", "UTC", "latest"), slot, now)
    assert runs
    assert latest == RecurrenceSlot(start + 20 * DAY, 7 + 20 * 1_440)
    assert oldest == RecurrenceSlot(latest.at - 999 * 60_000, latest.occurrence - 999)
