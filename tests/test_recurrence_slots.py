"""The slot arithmetic of recurrences: cron in a time zone across DST, and catch-up."""

from __future__ import annotations

import itertools
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

PARIS = ZoneInfo("Europe/Paris")
HOUR = 3_600_000


def ms(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 1000)


def local(at: int) -> str:
    return datetime.fromtimestamp(at / 1000, PARIS).isoformat()


def slots(recurrence: Recurrence, start: str, count: int) -> list[str]:
    slot = first_cron_slot(recurrence, ms(start))
    found = [slot]
    while len(found) < count:
        slot = next_slot(recurrence, slot)
        found.append(slot)
    assert [s.occurrence for s in found] == list(range(count))
    return [local(s.at) for s in found]


def test_a_spring_forward_day_runs_a_skipped_time_once_at_the_change() -> None:
    """On 2026-03-29 02:30 does not exist in Paris: the 02:30 job runs at 03:00 that day."""
    nightly = cron("30 2 * * *", "Europe/Paris", "latest")
    assert slots(nightly, "2026-03-27T12:00:00+01:00", 3) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_a_fall_back_day_runs_a_repeated_time_once() -> None:
    """On 2026-10-25 02:30 happens twice in Paris: the 02:30 job runs at the first."""
    nightly = cron("30 2 * * *", "Europe/Paris", "latest")
    assert slots(nightly, "2026-10-24T12:00:00+02:00", 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def test_hourly_slots_follow_real_hours_across_both_changes() -> None:
    """An hourly cron has 23 slots on the spring-forward day and 25 on the fall-back day."""
    hourly = cron("0 * * * *", "Europe/Paris", "latest")
    spring = slots(hourly, "2026-03-29T00:00:00+01:00", 24)
    assert [s for s in spring if s.startswith("2026-03-29")] == spring[:23]
    assert "2026-03-29T03:00:00+02:00" in spring and spring[23].startswith("2026-03-30")
    autumn = slots(hourly, "2026-10-25T00:00:00+02:00", 26)
    assert [s for s in autumn if s.startswith("2026-10-25")] == autumn[:25]
    assert "2026-10-25T02:00:00+02:00" in autumn and "2026-10-25T02:00:00+01:00" in autumn


def test_a_daily_wall_clock_time_is_23_or_25_hours_apart_at_the_changes() -> None:
    """09:00 Paris stays 09:00: slots are 24 h apart except across a change."""
    daily = cron("0 9 * * *", "Europe/Paris", "latest")
    spring = [ms(s) for s in slots(daily, "2026-03-28T00:00:00+01:00", 3)]
    autumn = [ms(s) for s in slots(daily, "2026-10-24T00:00:00+02:00", 3)]
    assert [b - a for a, b in itertools.pairwise(spring)] == [23 * HOUR, 24 * HOUR]
    assert [b - a for a, b in itertools.pairwise(autumn)] == [25 * HOUR, 24 * HOUR]


def test_the_first_cron_slot_is_at_or_after_now() -> None:
    """A cron scheduled exactly on a match takes that match; a millisecond later, the next."""
    minutely = cron("* * * * *", "UTC", "latest")
    at = ms("2026-06-01T10:00:00+00:00")
    assert first_cron_slot(minutely, at) == RecurrenceSlot(at, 0)
    assert first_cron_slot(minutely, at + 1) == RecurrenceSlot(at + 60_000, 0)


EVERY = Recurrence(kind="every", interval_ms=1_000)


@pytest.mark.parametrize(
    ("policy", "slot", "runs"),
    [
        ("latest", RecurrenceSlot(5_000, 5), True),
        ("skip", RecurrenceSlot(6_000, 6), False),
        ("all", RecurrenceSlot(0, 0), True),
    ],
)
def test_catch_up_policies(policy: str, slot: RecurrenceSlot, runs: bool) -> None:
    """Six slots due at once: latest runs the last, skip waits, all starts at the first."""
    recurrence = Recurrence(kind="every", interval_ms=1_000, catch_up=policy)  # type: ignore[arg-type]
    assert catch_up(recurrence, RecurrenceSlot(0, 0), 5_500) == (slot, runs)
    daily = cron("0 0 * * *", "UTC", policy)
    start = RecurrenceSlot(ms("2026-01-01T00:00:00+00:00"), 0)
    moved, moved_runs = catch_up(daily, start, ms("2026-01-06T12:00:00+00:00"))
    assert moved == RecurrenceSlot(start.at + slot.occurrence * 86_400_000, slot.occurrence)
    assert moved_runs is runs


def test_a_single_late_slot_runs_whatever_the_policy() -> None:
    """A slot that is due while its next one is not is late, not missed: it runs."""
    for policy in ("latest", "skip", "all"):
        recurrence = Recurrence(kind="every", interval_ms=1_000, catch_up=policy)
        assert catch_up(recurrence, RecurrenceSlot(0, 0), 999) == (RecurrenceSlot(0, 0), True)


def test_catch_up_all_keeps_the_latest_thousand() -> None:
    """With more than 1,000 slots due, "all" starts at the oldest of the latest 1,000."""
    recurrence = Recurrence(kind="every", interval_ms=1_000, catch_up="all")
    oldest, runs = catch_up(recurrence, RecurrenceSlot(0, 0), 1_499_999)
    assert (oldest, runs) == (RecurrenceSlot(500_000, 500), True)
    assert MAX_CATCH_UP == 1_000
    minutely = cron("* * * * *", "UTC", "all")
    start = RecurrenceSlot(ms("2026-01-01T00:00:00+00:00"), 0)
    oldest, _ = catch_up(minutely, start, start.at + 1_499 * 60_000)
    assert oldest == RecurrenceSlot(start.at + 500 * 60_000, 500)
