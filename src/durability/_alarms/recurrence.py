"""Recurrences of named alarms: what `every` and `cron` store, and the slot arithmetic.

A recurrence is a sequence of slots (times). Each slot is computed from the previous
slot, never from when a handler ran, so slots do not drift and none is early. `every`
slots are `start + k * interval`; `cron` slots are the matches of a five-field cron
expression in a time zone, as the `cronsim` library (the optional `cron`
extra) computes them, daylight-saving transitions included.

When several slots are due at once (the object was down across them), the catch-up
policy picks what runs: the latest of them, none (wait for the next future slot), or
each in order (at most `MAX_CATCH_UP`, the most recent). A single overdue slot is late,
not missed, and always runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .._distribution import install_hint
from .._types import MAX_SAFE_INTEGER
from .._validate import check_positive_int
from .cron_span import CronDays

CatchUp: TypeAlias = Literal["latest", "skip", "all"]
CATCH_UP_POLICIES: tuple[CatchUp, ...] = ("latest", "skip", "all")
MAX_CATCH_UP = 1_000
"""The most missed slots `catch_up="all"` runs after an outage (the most recent ones)."""

CRON_EXTRA = f"cron expressions need the optional extra: {install_hint('cron')}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Recurrence:
    """How a named alarm recurs: `kind` "every" (with `interval_ms`) or "cron" (with
    `expression` and `tz`), and the `catch_up` policy for slots missed while down."""

    kind: Literal["every", "cron"]
    interval_ms: int | None = None
    expression: str | None = None
    tz: str | None = None
    catch_up: CatchUp = "latest"


@dataclass(frozen=True, slots=True)
class RecurrenceSlot:
    """One slot of a recurrence: its time and its number (0 for the first slot)."""

    at: int
    occurrence: int


def check_catch_up(value: object) -> CatchUp:
    """A catch-up policy, else `TypeError`/`ValueError` naming `catch_up`."""
    if not isinstance(value, str):
        raise TypeError(f"catch_up must be a string, got {type(value).__name__}")
    for policy in CATCH_UP_POLICIES:
        if value == policy:
            return policy
    raise ValueError('catch_up must be one of "latest", "skip", "all"')


def every(interval_ms: object, catch_up: object) -> Recurrence:
    """The recurrence of `every(interval_ms, catch_up=...)`, validated."""
    interval = check_positive_int("interval_ms", interval_ms)
    return Recurrence(kind="every", interval_ms=interval, catch_up=check_catch_up(catch_up))


def cron(expression: object, tz: object, catch_up: object) -> Recurrence:
    """The recurrence of `cron(expression, tz=..., catch_up=...)`, validated.

    `ImportError` naming the extra when `cronsim` is missing; `ValueError` for an
    expression that is not five valid fields or never matches, or an unknown zone.
    """
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a string, got {type(expression).__name__}")
    if not isinstance(tz, str):
        raise TypeError(f"tz must be a string, got {type(tz).__name__}")
    policy = check_catch_up(catch_up)
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            "expression must have five fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}"
        )
    zone = _zone(tz)
    recurrence = Recurrence(kind="cron", expression=" ".join(fields), tz=tz, catch_up=policy)
    _cron_after(recurrence, zone, 0)
    return recurrence


def first_cron_slot(recurrence: Recurrence, now: int) -> RecurrenceSlot:
    """The first slot of a cron recurrence scheduled at `now`: its first match at or
    after `now`."""
    return RecurrenceSlot(_cron_after(recurrence, _zone(_tz(recurrence)), max(now - 1, 0)), 0)


def first_every_slot(recurrence: Recurrence, start_at: int | None, now: int) -> RecurrenceSlot:
    """The slot an `every` recurrence scheduled at `now` stores first: `start_at` (else
    `now`), or the one the catch-up policy picks when `start_at` is in the past.

    `ValueError` naming `interval_ms` (or `start_at`, when the interval alone would
    fit) when the slot after it would be past the largest storable time: the
    recurrence could not move on once the first slot ran.
    """
    interval = _interval(recurrence)
    start = now if start_at is None else start_at
    slot = RecurrenceSlot(start, 0)
    if start <= now:
        slot, _ = catch_up(recurrence, slot, now)
    if slot.at + interval > MAX_SAFE_INTEGER:
        name = (
            "interval_ms" if start_at is None or now + interval > MAX_SAFE_INTEGER else "start_at"
        )
        raise ValueError(
            f"{name} leaves no room for a second slot: {slot.at} + {interval} ms is past "
            f"{MAX_SAFE_INTEGER}, the latest time that can be stored (2**53 - 1 ms)"
        )
    return slot


def next_slot(recurrence: Recurrence, slot: RecurrenceSlot) -> RecurrenceSlot:
    """The slot after `slot`."""
    if recurrence.kind == "every":
        return RecurrenceSlot(slot.at + _interval(recurrence), slot.occurrence + 1)
    return RecurrenceSlot(
        _cron_after(recurrence, _zone(_tz(recurrence)), slot.at), slot.occurrence + 1
    )


def catch_up(recurrence: Recurrence, slot: RecurrenceSlot, now: int) -> tuple[RecurrenceSlot, bool]:
    """What to do with `slot`, due at `now`: the slot to store and whether it runs now.

    With no later slot due, `slot` runs. With later slots due too, the policy decides:
    "latest" runs the last due slot, "skip" waits for the first slot after `now`, and
    "all" runs them in order from `slot`, dropping the oldest beyond `MAX_CATCH_UP`.
    """
    following = next_slot(recurrence, slot)
    if following.at > now:
        return slot, True
    if recurrence.kind == "every":
        interval = _interval(recurrence)
        missed = (now - slot.at) // interval
        latest = RecurrenceSlot(slot.at + missed * interval, slot.occurrence + missed)
    else:
        days = _cron_days(recurrence)
        span = days.span(slot.at, now)
        assert span.last is not None
        latest = RecurrenceSlot(span.last, slot.occurrence + span.count)
    if recurrence.catch_up == "latest":
        return latest, True
    if recurrence.catch_up == "skip":
        return next_slot(recurrence, latest), False
    first_kept = latest.occurrence - MAX_CATCH_UP + 1
    if first_kept <= slot.occurrence:
        return slot, True
    if recurrence.kind == "every":
        return RecurrenceSlot(
            slot.at + (first_kept - slot.occurrence) * _interval(recurrence), first_kept
        ), True
    return RecurrenceSlot(days.nth(slot.at, now, first_kept - slot.occurrence), first_kept), True


def stored(recurrence: Recurrence | None) -> tuple[Any, ...]:
    """The five recurrence columns' values (all `None` for a one-shot)."""
    if recurrence is None:
        return (None, None, None, None, None)
    return (
        recurrence.kind,
        recurrence.interval_ms,
        recurrence.expression,
        recurrence.tz,
        recurrence.catch_up,
    )


def loaded(
    kind: object, interval: object, expression: object, tz: object, policy: object
) -> Recurrence | None:
    """The recurrence stored in the five columns (`None` for a one-shot)."""
    if kind is None:
        return None
    return Recurrence(
        kind="every" if kind == "every" else "cron",
        interval_ms=None if interval is None else check_positive_int("interval_ms", interval),
        expression=None if expression is None else str(expression),
        tz=None if tz is None else str(tz),
        catch_up=check_catch_up(policy),
    )


def _interval(recurrence: Recurrence) -> int:
    if recurrence.interval_ms is None:
        raise ValueError("an every recurrence needs interval_ms")
    return recurrence.interval_ms


def _tz(recurrence: Recurrence) -> str:
    return recurrence.tz or "UTC"


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f'tz must be an IANA time zone name, got "{tz}"') from error


def _cron_days(recurrence: Recurrence) -> CronDays:
    """The recurrence's expression cut into days, for counting its matches."""
    from cronsim import CronSim

    zone = _zone(_tz(recurrence))
    parsed = CronSim(recurrence.expression or "", datetime.fromtimestamp(0, UTC))
    return CronDays(parsed, zone, lambda after_ms: _cron_matches(recurrence, after_ms, zone))


def _cron_after(recurrence: Recurrence, zone: ZoneInfo, after_ms: int) -> int:
    """The first match of the expression strictly after `after_ms`, in `zone`."""
    return next(_cron_matches(recurrence, after_ms, zone))


def _cron_matches(
    recurrence: Recurrence, after_ms: int, zone: ZoneInfo | None = None
) -> Iterator[int]:
    """The matches of the expression strictly after `after_ms`, in order (one parse for
    all of them: catching up walks many)."""
    try:
        from cronsim import CronSim, CronSimError
    except ImportError as error:
        raise ImportError(CRON_EXTRA) from error
    tz = zone or _zone(_tz(recurrence))
    start = datetime.fromtimestamp(after_ms / 1000, UTC).astimezone(tz)
    expression = recurrence.expression or ""
    try:
        matches = CronSim(expression, start)
    except CronSimError as error:
        raise ValueError(f"expression is not a valid cron expression: {error}") from error
    while True:
        try:
            match = next(matches)
        except StopIteration:
            raise ValueError(f'expression "{expression}" matches no time in 50 years') from None
        at = round(match.timestamp() * 1000)
        if at > MAX_SAFE_INTEGER:
            raise ValueError(f'expression "{expression}" has no slot within the safe time range')
        yield at
