"""Commits on the real clock: `COMMIT` on the loop, then the log's sync the runtime makes
itself (alone on the loop, or side by side in the commit threads), before any future
of those commits ends."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from durability.runtime import DurableObject, Runtime, _commit_threads, _log_syncs
from durability.runtime._commit_threads import CommitThreads
from durability.runtime._database import Database
from durability.runtime._object_hooks import Unwatched
from durability.runtime._opening import open_database
from durability.runtime._storage import ObjectStorage


class Failures(Unwatched):
    """Hooks that record the errors of failed commits."""

    def __init__(self, failed: list[BaseException]) -> None:
        self.failed = failed

    def commit_failed(self, database: Database, error: BaseException) -> None:
        self.failed.append(error)


class AlarmCommits(Unwatched):
    """Hooks that call `before` ahead of an alarm commit and `after` once it is durable."""

    def __init__(
        self,
        before: Callable[[Database], tuple[None, object]],
        after: Callable[[object], object],
    ) -> None:
        self.before = before
        self.after = after

    def prepare_commit(self, database: Database) -> tuple[None, object]:
        return self.before(database)

    def committed(self, database: Database, prepared: object) -> None:
        self.after(prepared)


Synced = list[tuple[int, str]]
"""Each sync: the inode of the log it synced and the thread it ran in (always of a log
still linked in its directory: a sync of a deleted log would make nothing durable)."""


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Synced:
    """Record every log sync the databases make (and still make it)."""
    made: Synced = []
    sync = _log_syncs._sync_data

    def recording(descriptor: int) -> None:
        status = os.fstat(descriptor)
        assert status.st_nlink > 0, "synced a log that was deleted"
        made.append((status.st_ino, threading.current_thread().name))
        sync(descriptor)

    monkeypatch.setattr(_log_syncs, "_sync_data", recording)
    return made


@pytest.fixture
async def committer() -> AsyncIterator[CommitThreads]:
    threads = CommitThreads(2, "test-sync")
    yield threads
    threads.shutdown()


def write(database: Database, value: int) -> asyncio.Future[None]:
    """Join the turn's transaction and insert `value`; the transaction's commit future."""
    transaction = database.join()
    database.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
    database.execute("INSERT INTO t (v) VALUES (?)", value)
    return transaction


async def until(done: Callable[[], bool]) -> None:
    for _ in range(1_000):
        if done():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("timed out")


async def opened(path: Path, committer: CommitThreads) -> Database:
    """A file database past its first commit (which runs whole in a thread)."""
    database = open_database(asyncio.get_running_loop(), path, committer)
    await write(database, 0)
    return database


def log_inode(path: Path) -> int:
    return os.stat(f"{path}-wal").st_ino


@pytest.fixture
def quick_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Syncs count as quick whatever this disk's speed (a lone one runs on the loop)."""
    monkeypatch.setattr(_commit_threads, "QUICK_SYNC_SECONDS", 3600.0)


@pytest.mark.usefixtures("quick_syncs")
async def test_a_commit_ends_only_after_a_sync_of_its_log_that_began_after_it(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    file = tmp_path / "a.sqlite3"
    database = await opened(file, committer)
    assert database.connection().execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    first = len(synced)
    assert first == 1 and synced[0][1].startswith("test-sync")  # the whole first commit

    commit = write(database, 1)
    assert database.pending_commit is commit
    await asyncio.sleep(0)  # the turn's COMMIT ran; the sync round is next
    assert not database.connection().in_transaction
    assert not commit.done() and database.pending_commit is commit
    assert len(synced) == first
    await commit
    assert synced[first:] == [(log_inode(file), threading.main_thread().name)]
    assert database.pending_commit is None
    database.close()


async def test_on_a_slow_disk_even_a_lone_sync_runs_in_a_thread(
    tmp_path: Path, committer: CommitThreads, synced: Synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_commit_threads, "QUICK_SYNC_SECONDS", 0.0)
    database = await opened(tmp_path / "a.sqlite3", committer)
    before = len(synced)
    await write(database, 1)
    assert len(synced) == before + 1 and synced[-1][1].startswith("test-sync")
    database.close()


def test_how_long_syncs_took_is_a_moving_average() -> None:
    threads = CommitThreads(1, "test-sync")
    try:
        for _ in range(40):
            threads.took(0.004)
        assert 0.0039 < threads._sync_seconds <= 0.004
        previous = threads._sync_seconds
        threads.took(0.0)
        assert threads._sync_seconds == pytest.approx(previous * 7 / 8)
    finally:
        threads.shutdown()


async def test_a_read_only_commit_makes_no_sync_and_ends_at_once(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    database = await opened(tmp_path / "a.sqlite3", committer)
    before = len(synced)
    transaction = database.join()
    assert database.query("SELECT COUNT(*) FROM t") == [(1,)]
    await asyncio.sleep(0)
    assert transaction.done() and transaction.result() is None
    assert len(synced) == before and database.pending_commit is None
    database.close()


@pytest.mark.usefixtures("quick_syncs")
async def test_a_read_of_writes_not_yet_synced_waits_for_their_sync(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    """A read-only transaction that follows a commit still waiting for its sync ends with
    that sync, and is what a reader's result waits for (the output gate)."""
    database = await opened(tmp_path / "a.sqlite3", committer)
    written = write(database, 1)
    database.pipeline.commit_turn(written)  # the COMMIT, ahead of its turn's sync round
    assert not written.done()
    read = database.join()
    assert database.query("SELECT COUNT(*) FROM t") == [(2,)]
    database.pipeline.commit_turn(read)
    assert database.pending_commit is read and not read.done()
    ended: list[asyncio.Future[None]] = []
    written.add_done_callback(ended.append)
    read.add_done_callback(ended.append)
    await read
    assert ended == [written, read] and len(synced) == 2  # the first commit's, then one
    database.close()


async def test_a_lone_read_opens_no_transaction_and_is_held_by_the_commit_it_read(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    """`sql.exec` of statements that only read, with no transaction open, runs them bare
    (no `BEGIN`/`COMMIT`), and what a reply must wait for is still the commit it read
    (`pending_commit`, the output gate's); a read inside an open transaction joins it."""
    database = await opened(tmp_path / "a.sqlite3", committer)
    sql = ObjectStorage(database, "object").sql
    written = write(database, 1)
    database.pipeline.commit_turn(written)  # the COMMIT, ahead of its turn's sync round
    assert not written.done()
    assert sql.exec("SELECT COUNT(*) AS n FROM t").one()["n"] == 2
    assert database.open_transaction is None and database.pending_commit is written
    await written
    assert database.pending_commit is None
    joined = write(database, 3)
    assert sql.exec("SELECT COUNT(*) AS n FROM t").one()["n"] == 3
    assert database.open_transaction is joined
    await joined
    database.close()


async def test_syncs_of_objects_in_one_round_run_side_by_side_in_threads(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    databases = [await opened(tmp_path / f"{name}.sqlite3", committer) for name in "abc"]
    before = len(synced)
    commits = [write(database, 1) for database in databases]
    await asyncio.gather(*commits)
    made = synced[before:]
    assert sorted(inode for inode, _ in made) == sorted(
        log_inode(tmp_path / f"{name}.sqlite3") for name in "abc"
    )
    assert all(thread.startswith("test-sync") for _, thread in made)
    for database in databases:
        database.close()


async def test_commits_made_while_a_sync_runs_end_in_order_with_the_next_one(
    tmp_path: Path, committer: CommitThreads, synced: Synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit made while its object's sync runs waits for that one to end, then shares
    the next sync with every other commit made meanwhile; futures end in commit order."""
    a, b = [await opened(tmp_path / f"{name}.sqlite3", committer) for name in "ab"]
    gate = threading.Event()
    sync = _log_syncs._sync_log

    def held(log: int, committer: CommitThreads | None) -> None:
        if threading.current_thread() is not threading.main_thread():
            gate.wait()
        sync(log, committer)

    monkeypatch.setattr(_log_syncs, "_sync_log", held)
    first, other = write(a, 1), write(b, 1)
    await until(lambda: a.pipeline.syncs.syncing and b.pipeline.syncs.syncing)  # in threads
    before = len(synced)
    later = []
    for value in (2, 3):
        later.append(write(a, value))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not a.connection().in_transaction  # committed, not yet durable
    assert a.pending_commit is later[-1]
    ended: list[asyncio.Future[None]] = []
    for future in (first, *later):
        future.add_done_callback(ended.append)
    assert len(synced) == before and not ended
    gate.set()
    await asyncio.gather(first, other, *later)
    assert ended == [first, *later]
    inode = log_inode(tmp_path / "a.sqlite3")
    assert [made for made, _ in synced[before:]].count(inode) == 2  # held one, then one
    a.close()
    b.close()


async def test_a_failed_sync_fails_every_commit_not_yet_durable(
    tmp_path: Path, committer: CommitThreads, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = await opened(tmp_path / "a.sqlite3", committer)
    failed: list[BaseException] = []
    database.hooks = Failures(failed)

    def broken(descriptor: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_log_syncs, "_sync_data", broken)
    written = write(database, 1)
    database.pipeline.commit_turn(written)
    still_open = write(database, 2)
    with pytest.raises(OSError, match="Input/output error"):
        await written
    with pytest.raises(OSError, match="Input/output error"):
        await still_open
    assert len(failed) == 1 and database.pending_commit is None
    assert not database.connection().in_transaction
    database.close()


async def test_a_reopened_connection_syncs_its_new_log(tmp_path: Path, synced: Synced) -> None:
    """The pool closes an idle connection (SQLite then deletes the log) and reopens it on
    the next use: the syncs follow the new log (the fixture refuses a deleted one)."""
    async with Runtime(path=tmp_path, bindings={"N": Noted}, max_open_databases=1) as rt:
        a, b = rt.env.N.get_by_name("a"), rt.env.N.get_by_name("b")
        for _ in range(3):
            for stub in (a, b):  # each call closes the other object's connection
                before = len(synced)
                await stub.note()
                await stub.note()
                assert len(synced) > before
    assert len(synced) >= 12


class Noted(DurableObject):
    """Writes one row per call."""

    async def note(self) -> None:
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY)")
        self.ctx.storage.sql.exec("INSERT INTO notes DEFAULT VALUES")


async def test_a_failed_sync_is_not_retried_and_later_commits_fail_with_it(
    tmp_path: Path, committer: CommitThreads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After one failed sync nothing is synced again on that connection (what reached the
    disk is unknown): the object is told once, and every later commit fails at once."""
    database = await opened(tmp_path / "a.sqlite3", committer)
    failed: list[BaseException] = []
    database.hooks = Failures(failed)
    attempts = [0]

    def broken(descriptor: int) -> None:
        attempts[0] += 1
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_log_syncs, "_sync_data", broken)
    with pytest.raises(OSError):
        await write(database, 1)
    for _ in range(50):
        await asyncio.sleep(0)
    later = write(database, 2)
    with pytest.raises(OSError, match="Input/output error"):
        await later
    for _ in range(50):
        await asyncio.sleep(0)
    assert attempts == [1] and len(failed) == 1
    database.close()


async def test_a_whole_commit_whose_sync_fails_fails_like_any_failed_sync(
    tmp_path: Path, committer: CommitThreads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit of a connection runs whole in a thread: if its `COMMIT` returned
    but the sync after it failed, it fails, and so does every commit after it."""
    failed: list[BaseException] = []

    def broken(descriptor: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_log_syncs, "_sync_data", broken)
    database = open_database(asyncio.get_running_loop(), tmp_path / "a.sqlite3", committer)
    database.hooks = Failures(failed)
    with pytest.raises(OSError, match="Input/output error"):
        await write(database, 1)
    assert len(failed) == 1 and isinstance(failed[0], OSError)
    with pytest.raises(OSError, match="Input/output error"):
        await write(database, 2)
    assert len(failed) == 1
    database.close()


def test_a_member_of_a_sync_round_that_raises_does_not_strand_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    threads = CommitThreads(1, "test-sync")
    loop = asyncio.new_event_loop()
    called: list[str] = []

    def failing(here: bool) -> None:
        called.append("failing")
        raise RuntimeError("boom")

    try:
        threads.sync_round(loop, failing)
        threads.sync_round(loop, lambda here: called.append(f"other, here={here}"))
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
        threads.shutdown()
    assert called == ["failing", "other, here=False"]
    assert "a commit sync could not start" in caplog.text


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
async def test_the_runtime_holds_a_descriptor_of_the_log_but_none_of_its_index(
    tmp_path: Path, committer: CommitThreads
) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it,
    so the runtime never opens `-shm`, whose locks SQLite keeps; it opens the log
    (which SQLite never locks) to sync it, and closes it with the connection."""
    file = tmp_path / "a.sqlite3"
    database = await opened(file, committer)
    await write(database, 1)

    def descriptors(suffix: str) -> int:
        target = f"{file}{suffix}"
        return sum(1 for entry in Path("/proc/self/fd").iterdir() if _link(entry) == target)

    assert descriptors("-shm") == 1  # SQLite's own
    assert descriptors("-wal") == 2  # SQLite's and the runtime's
    database.close()
    assert descriptors("-wal") == 0


def _link(entry: Path) -> str | None:
    try:
        return os.readlink(entry)
    except OSError:
        return None


def test_a_rounds_work_runs_in_one_job_per_thread_with_each_error_kept_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs: list[list[int]] = []
    run = _commit_threads._run_tickets

    def recording(tickets: list[_commit_threads.Ticket]) -> None:
        jobs.append([ticket.arguments[0] for ticket in tickets])
        run(tickets)

    monkeypatch.setattr(_commit_threads, "_run_tickets", recording)
    threads = CommitThreads(3, "test-sync")
    loop = asyncio.new_event_loop()
    ran: list[tuple[int, str]] = []
    ended: list[tuple[int, BaseException | None]] = []

    def work(number: int) -> None:
        ran.append((number, threading.current_thread().name))
        if number == 4:
            raise OSError(5, "Input/output error")

    def member(number: int) -> Callable[[bool], object]:
        def sync(here: bool) -> None:
            threads.in_round(work, (number,), lambda ticket: ended.append((number, ticket.wait())))

        return sync

    try:
        for number in range(7):
            threads.sync_round(loop, member(number))
        loop.run_until_complete(_until_sync(lambda: len(ended) == 7))
    finally:
        loop.close()
        threads.shutdown()
    assert sorted(number for number, _ in ran) == list(range(7))
    assert all(thread.startswith("test-sync") for _, thread in ran)
    assert sorted(jobs) == [[0, 3, 6], [1, 4], [2, 5]]  # one job per thread
    errors = dict(ended)
    assert isinstance(errors.pop(4), OSError) and set(errors.values()) == {None}


def test_a_round_after_shutdown_still_runs_its_work() -> None:
    threads = CommitThreads(2, "test-sync")
    loop = asyncio.new_event_loop()
    ended: list[BaseException | None] = []
    try:
        threads.sync_round(
            loop,
            lambda here: threads.in_round(
                lambda: None, (), lambda ticket: ended.append(ticket.wait())
            ),
        )
        threads.sync_round(loop, lambda here: None)
        threads.shutdown()
        loop.run_until_complete(_until_sync(lambda: bool(ended)))
    finally:
        loop.close()
    assert ended == [None]


async def _until_sync(done: Callable[[], bool]) -> None:
    await until(done)


def hooks(database: Database, events: list[str]) -> None:
    """Alarm hooks that record their calls: `prepare_commit` hands `committed` a number."""
    numbers = iter(range(1, 100))

    def before(db: Database) -> tuple[None, object]:
        number = next(numbers)
        events.append(f"before {number}")
        return None, number

    database.hooks = AlarmCommits(before, lambda number: events.append(f"after {number}"))


async def test_an_alarm_change_waits_for_the_earlier_one_to_be_durable_first(
    tmp_path: Path, committer: CommitThreads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alarm changes take effect in commit order: the next one is prepared (its catalog
    entry lowered) only after the earlier one is durable and settled."""
    monkeypatch.setattr(_commit_threads, "QUICK_SYNC_SECONDS", 0.0)
    database = await opened(tmp_path / "a.sqlite3", committer)
    events: list[str] = []
    hooks(database, events)
    gate = threading.Event()
    sync = _log_syncs._sync_log

    def held(log: int, threads: CommitThreads | None) -> None:
        gate.wait()
        sync(log, threads)

    monkeypatch.setattr(_log_syncs, "_sync_log", held)
    first = write(database, 1)
    database.alarm_changed = True
    await until(lambda: database.pipeline.syncs.syncing)
    second = write(database, 2)
    database.alarm_changed = True
    threading.Timer(0.05, gate.set).start()
    await asyncio.gather(first, second)
    assert events == ["before 1", "after 1", "before 2", "after 2"]
    database.close()


async def test_an_alarm_change_is_read_before_its_sync_and_settled_once_durable(
    tmp_path: Path, committer: CommitThreads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What reads the alarm row does not wait for the sync of a change committed on the
    loop (a failed sync rebuilds the object; a crash that loses it loses what followed);
    its catalog entry still settles only once it is durable."""
    monkeypatch.setattr(_commit_threads, "QUICK_SYNC_SECONDS", 0.0)
    database = await opened(tmp_path / "a.sqlite3", committer)
    events: list[str] = []
    hooks(database, events)
    started, gate = threading.Event(), threading.Event()
    sync = _log_syncs._sync_log

    def held(log: int, threads: CommitThreads | None) -> None:
        started.set()
        gate.wait()
        sync(log, threads)

    monkeypatch.setattr(_log_syncs, "_sync_log", held)
    change = write(database, 1)
    database.alarm_changed = True
    await asyncio.to_thread(started.wait)
    assert not change.done() and not database.connection().in_transaction
    database.settle()  # returns at once: the held sync is not waited for
    assert not change.done() and events == ["before 1"]
    gate.set()
    await change
    assert events == ["before 1", "after 1"]
    write_plain = write(database, 2)
    database.settle()
    assert not write_plain.done()
    await write_plain
    database.close()


@pytest.mark.usefixtures("quick_syncs")
async def test_alarm_changes_made_durable_by_one_sync_settle_as_the_last_of_them(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    """Two alarm changes committed before a sync covers them: one sync, and only the
    last one settles (the catalog never holds the earlier one meanwhile)."""
    database = await opened(tmp_path / "a.sqlite3", committer)
    events: list[str] = []
    hooks(database, events)
    before = len(synced)
    first = write(database, 1)
    database.alarm_changed = True
    await asyncio.sleep(0)  # the first commits; its sync waits for later turns
    assert not database.connection().in_transaction and not first.done()
    second = write(database, 2)
    database.alarm_changed = True
    await asyncio.gather(first, second)
    assert events == ["before 1", "before 2", "after 2"]
    assert len(synced) - before == 1
    database.close()


@pytest.mark.usefixtures("quick_syncs")
async def test_a_sync_nobody_waits_for_waits_two_turns_for_company(
    tmp_path: Path, committer: CommitThreads, synced: Synced
) -> None:
    """A commit nobody waits for syncs two loop turns later, with what those turns
    commit; once something waits for it (`hurry`, as `storage.sync()` and the output
    gate do), its sync runs at the next turn after its commit."""
    database = await opened(tmp_path / "a.sqlite3", committer)
    before = len(synced)
    alone = write(database, 1)
    await asyncio.sleep(0)  # committed; the sync waits
    company = write(database, 2)
    for _ in range(2):
        await asyncio.sleep(0)
    assert not alone.done()
    await asyncio.sleep(0)
    assert alone.done() and company.done() and len(synced) - before == 1
    awaited = write(database, 3)
    database.pipeline.syncs.hurry()
    await asyncio.sleep(0)  # committed
    assert not awaited.done()
    await asyncio.sleep(0)  # synced
    assert awaited.done() and len(synced) - before == 2
    database.close()
