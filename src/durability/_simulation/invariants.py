"""Ready-made invariants for the common promises, checked at the end of a simulation run.

An invariant is a callable taking the `SimulationRun` once the scenario (and the quiet
period after it) is over; it raises `AssertionError` saying what is wrong. One that also
has an `observe(run)` method is shown the run after every step, to keep what it needs
(in `run.memo`) about states the end no longer shows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from .._operations.calls import IDEMPOTENCY_PREFIX, call_idempotency_key
from .._serialization import deserialize
from ..runtime import ObjectStub
from .run import SimulationRun
from .state import StoredObject

Invariant = Callable[[SimulationRun], None]
"""A check of a finished run: raises `AssertionError` (or any error) when it fails."""

_PENDING_QUERIES = (
    ("operation", "durability_calls", "operation || ' ' || id", "status = 'pending'"),
    ("named alarm", "durability_alarms", "name", "status = 'pending'"),
    ("fanout delivery", "durability_fanout_deliveries", "target_id || ' ' || id", "1"),
)


class Observing(Protocol):
    """An invariant that is also shown the run after each step."""

    def __call__(self, run: SimulationRun) -> None: ...

    def observe(self, run: SimulationRun) -> None: ...


def name_of(invariant: Invariant) -> str:
    """How a report names `invariant`."""
    return str(getattr(invariant, "__name__", type(invariant).__name__))


class _Recorded:
    """Completed operations never change: one result and one completion per generation."""

    __name__ = "effects_at_least_once"

    def __init__(self, operations: Collection[str] | None) -> None:
        self._operations = None if operations is None else frozenset(operations)

    def _completed(self, run: SimulationRun) -> dict[tuple[str, str, str], tuple[Any, ...]]:
        found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        for stored in run.objects():
            if not stored.has("durability_calls"):
                continue
            for row in stored.rows(
                "SELECT id, operation, generation_id, status, result, completed_at "
                "FROM durability_calls WHERE status = 'completed'"
            ):
                if self._operations is None or row["operation"] in self._operations:
                    key = (stored.id, str(row["operation"]), str(row["id"]))
                    found[key] = (row["generation_id"], row["result"], row["completed_at"])
        return found

    def observe(self, run: SimulationRun) -> None:
        __tracebackhide__ = True
        seen: dict[tuple[str, str, str], tuple[Any, ...]] = run.memo.setdefault(self.__name__, {})
        if run.memo.get(f"{self.__name__} commits") == run.commits:
            return  # nothing was committed since the last look
        run.memo[f"{self.__name__} commits"] = run.commits
        for key, record in self._completed(run).items():
            before = seen.setdefault(key, record)
            if before[0] == record[0] and before != record:
                raise AssertionError(
                    f"operation {key[1]} {key[2]} was recorded completed twice: "
                    f"{before[1:]} then {record[1:]}"
                )

    def __call__(self, run: SimulationRun) -> None:
        __tracebackhide__ = True
        self.observe(run)
        missing = [
            f"{operation} {id}"
            for (object_hex, operation, id) in self._completed(run)
            if run.ledger.count(call_idempotency_key(object_hex, operation, id)) == 0
        ]
        if missing:
            raise AssertionError(
                f"{len(missing)} operation(s) completed with no effect in the ledger under "
                f"their idempotency key: {', '.join(sorted(missing)[:5])}"
            )


def effects_at_least_once(*operations: str) -> Observing:
    """Every completed operation (of `operations`, default every one) had its effect: the
    ledger holds its `call.idempotency_key` at least once; and its result was recorded
    once: a completed record never changes afterwards (checked after every step).

    The fakes must record `call.idempotency_key` (`run.ledger.record(key, ...)`).
    """
    return _Recorded(operations or None)


def charged_once() -> Invariant:
    """No subject in the ledger was charged under two idempotency keys: a retry that drew
    a new key (a random or time-based id) would have applied its effect twice."""

    def charged_once(run: SimulationRun) -> None:
        __tracebackhide__ = True
        twice = {
            subject: keys
            for subject, keys in run.ledger.by_subject().items()
            if subject is not None and len(keys) > 1
        }
        if twice:
            subject, keys = next(iter(twice.items()))
            raise AssertionError(
                f"{len(twice)} subject(s) charged under more than one idempotency key, "
                f"e.g. {subject!r} under {[_short(key) for key in keys]}"
            )

    return charged_once


def _short(key: str) -> str:
    """An operation's idempotency key without its prefix and object id: `operation:id`."""
    if key.startswith(IDEMPOTENCY_PREFIX):
        return key[len(IDEMPOTENCY_PREFIX) :].split(":", 1)[-1]
    return key


def nothing_stranded(grace_ms: int = 60_000) -> Invariant:
    """Every pending operation, named alarm (recurrences included) and fanout delivery
    will run: it is not overdue by more than `grace_ms`, and its object's alarm is armed
    for it (no later than `grace_ms` after it is due), with the runtime holding that alarm.
    Terminal records (completed, failed, cancelled) are fine; suspects (interrupted
    attempts waiting to run alone) are pending like any other."""

    def nothing_stranded(run: SimulationRun) -> None:
        __tracebackhide__ = True
        now = run.now_ms()
        stranded: list[str] = []
        for stored in run.objects():
            for what, table, label, condition in _PENDING_QUERIES:
                if not stored.has(table):
                    continue
                for row in stored.rows(
                    f"SELECT {label} AS label, next_attempt_at AS due FROM {table} "
                    f"WHERE {condition}"
                ):
                    problem = _why_stranded(run, stored, int(row["due"]), now, grace_ms)
                    if problem:
                        stranded.append(f"{stored.label} {what} {row['label']}: {problem}")
        if stranded:
            raise AssertionError(
                f"{len(stranded)} pending item(s) stranded: " + "; ".join(stranded[:5])
            )

    return nothing_stranded


def _why_stranded(
    run: SimulationRun, stored: StoredObject, due: int, now: int, grace_ms: int
) -> str | None:
    if due < now - grace_ms:
        return f"due {(now - due) // 1000} s ago"
    alarm = stored.alarm_at
    if alarm is None:
        return "its object has no alarm"
    if alarm > max(due, now) + grace_ms:
        return f"its object's alarm is {(alarm - due) // 1000} s after it is due"
    if not run.runtime._host_alarms.holds((stored.namespace, stored.id)):
        return "the runtime does not hold its object's alarm"
    return None


def log_offsets_contiguous() -> Invariant:
    """Each log's offsets are contiguous: the hot records run without a gap up to the
    next offset, and the cold segments tile the offsets below them."""

    def log_offsets_contiguous(run: SimulationRun) -> None:
        __tracebackhide__ = True
        for stored in run.objects():
            if stored.has("durability_log_seq", "durability_log_records"):
                _check_log(stored)

    return log_offsets_contiguous


def _check_log(stored: StoredObject) -> None:
    seq = stored.rows("SELECT next_offset FROM durability_log_seq WHERE id = 1")
    next_offset = int(seq[0]["next_offset"]) if seq else 0
    hot = [int(r["offset"]) for r in stored.rows("SELECT offset FROM durability_log_records")]
    hot.sort()
    if hot and hot != list(range(hot[0], next_offset)):
        gaps = sorted(set(range(hot[0], next_offset)) - set(hot))[:5]
        raise AssertionError(f"{stored.label}: log offsets {gaps} missing below {next_offset}")
    if not stored.has("durability_log_segments"):
        return
    segments = stored.rows(
        "SELECT first_offset, last_offset FROM durability_log_segments ORDER BY first_offset"
    )
    expected_end = hot[0] if hot else next_offset
    for index, before in enumerate(segments):
        after = segments[index + 1] if index + 1 < len(segments) else None
        end = expected_end if after is None else int(after["first_offset"])
        if int(before["last_offset"]) + 1 != end:
            raise AssertionError(
                f"{stored.label}: cold segment {before['first_offset']}..{before['last_offset']}"
                f" is followed by offset {end}"
            )


def appends_kept(
    acknowledged: Callable[[SimulationRun], Iterable[tuple[ObjectStub, int, Any]]],
) -> Invariant:
    """No acknowledged append was lost: for each `(stub, offset, body)` that
    `acknowledged(run)` names (appends whose call returned, as the scenario kept them in
    `run.seen`), the object's log still holds `body` at `offset`, or keeps that offset in
    a cold segment, or trimmed it by retention (below every record it keeps)."""

    def appends_kept(run: SimulationRun) -> None:
        __tracebackhide__ = True
        objects = {(stored.namespace, stored.id): stored for stored in run.objects()}
        lost: list[str] = []
        for stub, offset, body in acknowledged(run):
            stored = objects.get((stub.id.namespace, str(stub.id)))
            problem = "its object is gone" if stored is None else _kept(stored, offset, body)
            if problem:
                lost.append(f"{stub.id.namespace}:{stub.id.name} offset {offset}: {problem}")
        if lost:
            raise AssertionError(f"{len(lost)} acknowledged append(s) lost: {'; '.join(lost[:5])}")

    return appends_kept


def _kept(stored: StoredObject, offset: int, body: Any) -> str | None:
    if not stored.has("durability_log_seq", "durability_log_records"):
        return "it has no log"
    next_offset = int(stored.rows("SELECT next_offset FROM durability_log_seq")[0]["next_offset"])
    if offset >= next_offset:
        return f"the log ends before it (next offset {next_offset})"
    rows = stored.rows("SELECT payload FROM durability_log_records WHERE offset = ?", offset)
    if rows:
        kept = deserialize(rows[0]["payload"])
        return None if kept == body else f"it holds {kept!r} instead of {body!r}"
    lowest = stored.rows("SELECT MIN(offset) AS first FROM durability_log_records")[0]["first"]
    if lowest is not None and offset > int(lowest):
        return "it is missing from the hot records"
    return None
