"""Counting a cron expression's matches over a span without computing each match.

Catching up after downtime needs the number of slots missed (it gives the occurrence
number), the latest of them, and for "all" the 1,000th from the end; walking every
match would cost a year of minutes (525,600 steps) for one object back after a year.
So a span is cut at the local midnights of the zone, and each day is one of:

- a regular day (24 hours, one UTC offset throughout): its matches are the wall times
  whose hour, minute and second are in the expression's sets on a day the expression
  matches, counted with a binary search in the sorted times of the day;
- an irregular day (a daylight-saving change, or a zone that skipped a date, and the
  day after one): its matches are walked one by one with `cronsim`, which decides where
  a skipped or a repeated wall time runs.

Work is proportional to the days spanned (at most 50 years, a few microseconds each)
plus the matches of the few irregular days, not to the matches in between.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

DAY_MS = 86_400_000

Walk = Callable[[int], Iterator[int]]
"""The matches strictly after a time, in order (see `recurrence._cron_matches`)."""


@dataclass(frozen=True, slots=True)
class Span:
    """The matches of a span: how many, and the last (`None` when there are none)."""

    count: int
    last: int | None


class CronDays:
    """One cron expression in one zone, cut into days (see the module's docstring)."""

    def __init__(self, parsed: Any, zone: ZoneInfo, walk: Walk) -> None:
        self._parsed = parsed
        self._zone = zone
        self._walk = walk
        self._times: list[int] = sorted(
            hour * 3_600 + minute * 60 + second
            for hour in parsed.hours
            for minute in parsed.minutes
            for second in parsed.seconds
        )
        """Seconds after midnight of every wall time the expression matches on its days."""

    def span(self, after: int, through: int) -> Span:
        """The matches `m` with `after < m <= through`."""
        count = 0
        last: int | None = None
        for low, high, day in self._days(after + 1, through + 1):
            found, at = self._in_day(low, high, day)
            count += found
            if at is not None:
                last = at
        return Span(count, last)

    def nth(self, after: int, through: int, n: int) -> int:
        """The `n`-th match `m` with `after < m <= through` (`n >= 1`)."""
        for low, high, day in self._days(after + 1, through + 1):
            found, _ = self._in_day(low, high, day)
            if found < n:
                n -= found
                continue
            if day is None:
                matches = self._walk(low - 1)
                for _ in range(n - 1):
                    next(matches)
                return next(matches)
            start = self._midnight(day)
            first = bisect.bisect_left(self._times, _seconds_from(start, low))
            return start + self._times[first + n - 1] * 1_000
        raise ValueError(f"fewer than {n} matches after {after} through {through}")

    def _in_day(self, low: int, high: int, day: date | None) -> tuple[int, int | None]:
        """The count and last of the matches in `[low, high)`, all within one day
        (`day` for a regular one, `None` for an irregular one, which is walked)."""
        if day is None:
            count = 0
            last: int | None = None
            for at in self._walk(low - 1):
                if at >= high:
                    break
                count += 1
                last = at
            return count, last
        if day.month not in self._parsed.months or not self._parsed.match_day(day):
            return 0, None
        start = self._midnight(day)
        first = bisect.bisect_left(self._times, _seconds_from(start, low))
        end = bisect.bisect_left(self._times, _seconds_from(start, high))
        if end <= first:
            return 0, None
        return end - first, start + self._times[end - 1] * 1_000

    def _days(self, low: int, high: int) -> Iterator[tuple[int, int, date | None]]:
        """`[low, high)` cut at local midnights: `(from, to, day)` with `day` `None` for
        an irregular day."""
        day = self._local(low).date()
        start = self._midnight(day)
        settled = self._steady(self._midnight(day - timedelta(days=1)), start)
        while start < high:
            following = day + timedelta(days=1)
            end = self._midnight(following)
            steady = self._steady(start, end)
            if end > low:
                yield max(low, start), min(high, end), day if steady and settled else None
            day, start, settled = following, end, steady

    def _steady(self, start: int, end: int) -> bool:
        """Whether the day from `start` to `end` has 24 hours and one UTC offset. A day
        after one that is not is walked too: a wall time a change skipped runs at the
        first time after the change, which is the next day's midnight when the change
        skipped a whole date."""
        return end - start == DAY_MS and self._offset(start) == self._offset(end - 1)

    def _local(self, at: int) -> datetime:
        return datetime.fromtimestamp(at / 1000, UTC).astimezone(self._zone)

    def _midnight(self, day: date) -> int:
        """The UTC time of the midnight starting `day` (the first instant after it
        when that midnight was skipped)."""
        return round(datetime.combine(day, time(), tzinfo=self._zone).timestamp() * 1000)

    def _offset(self, at: int) -> timedelta | None:
        return self._local(at).utcoffset()


def _seconds_from(start: int, at: int) -> int:
    """Whole seconds from `start` to `at`, rounded up (a match is on a whole second)."""
    return -((start - at) // 1_000)
