"""Reconciling the physical alarm with the pending rows, inside the writing transaction.

The alarm is a bounded fallback: it is armed for the earliest pending row, but never
sooner than `alarm_min_delay_ms` from now, and an alarm already inside that window is
left alone so frequent writes cannot keep pushing it later. The reconcile also tells
the caller when the early timer should fire, keeping apart the tables whose running
pass still takes due rows: that pass owes them their next pass, so a timer for them
would only start a pass that skips them, reconcile again and re-arm, forever.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from .._clock import now_ms
from .._context import SqlStorage, Transaction
from .options import SchedulerOptions
from .participants import Participant
from .running import RunningExecutions
from .tables import pending_head


def pending_times(
    sql: SqlStorage, participant: Participant, running: Collection[str]
) -> tuple[int | None, int | None]:
    """(earliest pending time for the alarm, earliest time for the in-memory timer).

    The timer skips keys in `running`: whatever runs them reconciles again once they end.
    """
    if participant.next_pending_at is not None:
        at = participant.next_pending_at(sql)
        if at is None:
            return None, None
        holding = participant.holding is not None and participant.holding()
        return at, None if holding else at
    rows = pending_head(sql, participant.table, len(running) + 1)
    if not rows:
        return None, None
    physical = rows[0][1]
    eligible = next((at for key, at in rows if key not in running), None)
    return physical, eligible


@dataclass(frozen=True, slots=True)
class TimerTimes:
    """What a reconcile asks of the early timer.

    `at`: when to fire for work no running pass is taking (`None`: never);
    `deferred`: the earliest timer time of each table in the reconcile's `serving`.
    """

    at: int | None = None
    deferred: dict[str, int] = field(default_factory=dict)


async def reconcile(
    txn: Transaction,
    sql: SqlStorage,
    participants: Sequence[Participant],
    running: RunningExecutions,
    options: SchedulerOptions,
    serving: Collection[str],
    added_due_at: int | None = None,
    timed: bool = True,
) -> TimerTimes | None:
    """Arm the alarm for the earliest pending row; return the early timer's times.

    `serving` names the tables whose running pass still takes due rows; `added_due_at`
    is the due time of a row this transaction added, if any, and `timed` False says its
    participant is holding (serves it itself): when the shortcut below settles the
    alarm, the result is then `None`, for "leave the timer as it is".
    """
    now = now_ms()
    min_delay = options.alarm_min_delay_ms
    # The shortcut cannot tell which table the added row is in, so it is only for
    # when no table is deferred.
    if added_due_at is not None and added_due_at <= now and not serving:
        current = await txn.get_alarm()
        latest = now + min_delay
        # The earliest pending time is at most `added_due_at`, so the window is
        # [earliest, now + min delay]: an alarm in [added_due_at, latest] is inside
        # it, a missing or later one moves to `latest`. Only an alarm before
        # `added_due_at` needs the earliest pending time itself.
        if current is None or current > latest:
            await txn.set_alarm(latest)
            return TimerTimes(added_due_at) if timed else None
        if current >= added_due_at:
            return TimerTimes(added_due_at) if timed else None
    physical_times: list[int] = []
    timer_times: list[int] = []
    deferred: dict[str, int] = {}
    for participant in participants:
        table = participant.table.name
        physical, timer = pending_times(sql, participant, running.keys(table))
        if physical is not None:
            physical_times.append(physical)
        if timer is None:
            continue
        if table in serving:
            deferred[table] = timer
        else:
            timer_times.append(timer)
    current = await txn.get_alarm()
    if not physical_times:
        if current is not None:
            await txn.delete_alarm()
        return TimerTimes()
    earliest = min(physical_times)
    target = max(earliest, now + min_delay)
    # An alarm already inside [earliest, target] stays, so frequent reconciliation
    # cannot keep pushing the fallback later.
    if current is None or current < earliest or current > target:
        await txn.set_alarm(target)
    return TimerTimes(min(timer_times) if timer_times else None, deferred)
