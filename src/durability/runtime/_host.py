"""`Runtime`: hosts Durable Objects on this machine, in memory or one SQLite file each.

It builds instances (on first call or alarm) and drops them (`evict`, `crash`, a failed
commit), routes stub calls to them through their input and output gates, and ties
together the live instances (`LiveInstances`: the cap, idleness), the object databases
(`ObjectDatabases`: files, path lock, alarm catalog, commit threads) and alarm delivery on
the runtime's clock.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from .._clock import WALL_CLOCK, Clock, bind_clock, unbind_clock
from .._validate import check_positive_int
from ._alarm_driver import AlarmDriver
from ._bindings import HostedBinding
from ._catalog_file import Key
from ._commit_faults import CommitFaults
from ._database import Database
from ._databases import ObjectDatabases
from ._faults import Faults
from ._hibernation import SocketHub
from ._ids import ObjectId
from ._instance import Instance, InstanceHost
from ._limits import DEFAULT_MAX_LIVE_OBJECTS, default_max_open_databases
from ._live import LiveInstances
from ._object import DurableObject
from ._object_hooks import ObjectHooks
from ._platform import EMBEDDED, Platform
from ._private_tables import recorded_name
from ._stub import Env, ObjectNamespace, ObjectStub
from ._teardown import crash_at_commit, discard, wind_down

logger = logging.getLogger("durability.runtime")

DEFAULT_IDLE_EVICT_MS = 60_000
"""An instance with no call, alarm or background work for this long is evicted."""

NO_BINDINGS: Mapping[str, object] = MappingProxyType({})
"""The default `bindings`: equal to `{}`, and read-only so no call can change it."""


class _State(enum.Enum):
    """Where a `Runtime` is in its one life: new, running, closing, then closed."""

    NEW = "new"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


def _checked_options(
    path: object,
    clock: object,
    idle_evict_ms: int | None,
    max_live_objects: int | None,
    max_open_databases: int | None,
    faults: object,
) -> tuple[int, int]:
    """Check `Runtime`'s options (a clear error naming the bad one); the live-object and
    open-database caps, defaults filled in."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or path-like, got {type(path).__name__}")
    if clock is not None and not callable(getattr(clock, "now_ms", None)):
        raise TypeError("clock must have a now_ms() method")
    if idle_evict_ms is not None:
        check_positive_int("idle_evict_ms", idle_evict_ms)
    if max_live_objects is None:
        max_live_objects = DEFAULT_MAX_LIVE_OBJECTS
    if max_open_databases is None:
        max_open_databases = default_max_open_databases()
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError(f"faults must be a durability.testing.Faults, got {type(faults).__name__}")
    return (
        check_positive_int("max_live_objects", max_live_objects),
        check_positive_int("max_open_databases", max_open_databases),
    )


class Runtime:
    """An embedded host for Durable Objects (docs/runtime.md).

    `path=None` keeps every object in memory; a path keeps one SQLite file per object
    under `<path>/<NAMESPACE>/<id>.sqlite3`, the alarm catalog in
    `<path>/_catalog.sqlite3`, and a lock so only one Runtime uses the path at a time.
    `idle_evict_ms` (default 60 s of the runtime's clock; `None` disables) evicts
    instances that have been idle that long (hibernation). `max_live_objects` caps the
    live instances: past it, the least recently used idle ones are evicted.
    `max_open_databases` caps the object files open at once: past it, the least
    recently used idle live objects' files are closed, and reopened on their next use
    (`None` sizes it from the open-file limit, four descriptors per file). `platform`
    builds what objects see of their host (default: this runtime's own `ctx` and
    `AlarmInvocationInfo`; see `Platform`). `faults` (a `durability.testing.Faults`) is
    asked before each commit, at each `set_alarm`, when an alarm is queued and around
    cold-store calls whether to inject a fault there (default: none, never asked).
    """

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        bindings: Mapping[str, object] | None = NO_BINDINGS,
        clock: Clock | None = None,
        idle_evict_ms: int | None = DEFAULT_IDLE_EVICT_MS,
        max_live_objects: int | None = None,
        max_open_databases: int | None = None,
        platform: Platform | None = None,
        faults: Faults | None = None,
    ) -> None:
        max_live, max_open = _checked_options(
            path, clock, idle_evict_ms, max_live_objects, max_open_databases, faults
        )
        self.faults: Faults | None = faults
        self._clock: Clock = clock if clock is not None else WALL_CLOCK
        self.platform: Platform = platform if platform is not None else EMBEDDED
        root = Path(path) if path is not None else None
        self._databases = ObjectDatabases(root, self._clock, max_open)
        self._namespaces: dict[str, ObjectNamespace] = {}
        self._env = Env(self._bind(bindings if bindings is not None else {}))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = _State.NEW
        self._live = LiveInstances(
            max_live, idle_evict_ms, lambda instance: discard(instance, crash=False)
        )
        self._host_alarms = AlarmDriver(self, self._databases.catalog)
        self._sockets = SocketHub(self)
        self._host = InstanceHost(
            self.platform,
            self._sockets,
            self._live.schedule_idle,
            self._crash_inside,
            self._aborted,
        )

    def _bind(self, bindings: Mapping[str, object]) -> dict[str, object]:
        if not isinstance(bindings, Mapping):
            raise TypeError(f"bindings must be a mapping, got {type(bindings).__name__}")
        values: dict[str, object] = {}
        for name, value in bindings.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"binding names must be identifiers, got {name!r}")
            if isinstance(value, type) and issubclass(value, DurableObject):
                namespace = ObjectNamespace(self, name, value)
                self._namespaces[name] = namespace
                values[name] = namespace
            elif isinstance(value, HostedBinding):
                namespace = ObjectNamespace(self, name, value.object_class)
                self._namespaces[name] = namespace
                values[name] = value.wrap(namespace)
            else:
                values[name] = value
        return values

    @property
    def env(self) -> Env:
        """The bindings: `rt.env.NAME` (a namespace for `DurableObject` classes)."""
        return self._env

    def namespace(self, name: str) -> ObjectNamespace:
        """The namespace bound under `name`."""
        try:
            return self._namespaces[name]
        except KeyError:
            raise KeyError(f"no DurableObject class is bound as {name!r}") from None

    @property
    def path(self) -> Path | None:
        """The directory of the objects' files, or `None` for an in-memory runtime."""
        return self._databases.path

    @property
    def clock(self) -> Clock:
        """The clock the runtime keeps time by (a `VirtualClock` in tests and demos)."""
        return self._clock

    @property
    def max_live_objects(self) -> int:
        """The most instances kept live before idle ones are evicted, oldest use first."""
        return self._live.max_live

    @property
    def max_open_databases(self) -> int:
        """The most object files kept open before idle ones are closed, oldest use first."""
        return self._databases.max_open

    def now_ms(self) -> int:
        """The runtime clock's current time."""
        return self._clock.now_ms()

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Take the path, attach the clock, and arm every alarm found in the catalog."""
        if self._state is not _State.NEW:
            raise RuntimeError("a Runtime can be started once; create a new one")
        loop = asyncio.get_running_loop()
        _refuse_eager_tasks(loop)
        self._databases.open(loop)
        attach = getattr(self._clock, "attach", None)
        if callable(attach):
            attach(loop)
        else:
            bind_clock(loop, self._clock)
        self._loop = loop
        self._state = _State.RUNNING
        self._live.start(loop)
        self._host_alarms.start(loop)

    async def close(self) -> None:
        """Commit what is pending, stop every instance and timer, release the path.

        The path, the file handles and the clock are released even when a step fails;
        the first failure is raised afterwards.
        """
        if self._state is not _State.RUNNING or self._loop is None:
            return
        self._state = _State.CLOSING
        loop = self._loop
        try:
            self._sockets.close_all()
            pending: list[asyncio.Future[Any]] = list(self._host_alarms.close())
            for instance in self._live.stop():
                pending.extend(discard(instance, crash=False))
            await wind_down(pending)
        finally:
            self._release(loop)

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close every file and give up the path and the clock, whatever fails."""
        steps = self._databases.closing_steps()
        detach = getattr(self._clock, "detach", None)
        if callable(detach):
            steps.append(lambda: detach(loop))
        else:
            steps.append(lambda: unbind_clock(loop, self._clock))
        self._state = _State.CLOSED
        _run_every(steps)

    async def evict(self, target: ObjectStub | ObjectId) -> None:
        """Drop the live instance: cancel its work, fence its ctx; data and alarm stay."""
        await self._drop(_key_of(target), crash=False)

    async def crash(self, target: ObjectStub | ObjectId) -> None:
        """Like `evict`, and writes not yet committed are lost, as in a killed process."""
        await self._drop(_key_of(target), crash=True)

    def _live_instance(self, key: Key, object_id: ObjectId) -> Instance:
        """The object's live instance, built if needed, for a stub call (`key`: its
        object key, which the stub computes once)."""
        return self._live.get(key) or self._instance(object_id)

    async def run(self, instance: Instance, invoke: Callable[[DurableObject], object]) -> object:
        """Deliver `invoke` to `instance` as one call; eviction surfaces as an error."""
        return await instance.call(invoke)

    def instance_for_alarm(self, key: Key, name: str | None) -> Instance | None:
        """The live instance for an alarm (built if needed); `None` if its class is unbound."""
        if key[0] not in self._namespaces or self._state is not _State.RUNNING:
            return None
        return self._instance(ObjectId(key[0], key[1], name))

    def _instance(self, object_id: ObjectId) -> Instance:
        key = (object_id.namespace, str(object_id))
        instance = self._live.get(key)
        if instance is not None:
            return instance
        if self._state is not _State.RUNNING or self._loop is None:
            raise RuntimeError(
                "the Runtime is not running: use `async with Runtime(...) as rt:` "
                "(or `await rt.start()`), and make calls before it closes"
            )
        namespace = self._namespaces[object_id.namespace]
        hooks = ObjectHooks(key, self._host_alarms, self._commit_failed)
        database = self._databases.database(key, hooks)
        recorded = recorded_name(database)
        name = object_id.name if object_id.name is not None else self._host_alarms.name_of(key)
        if name is None:
            name = recorded
        elif recorded is None:
            database.record_name(name)
        if name != object_id.name:
            object_id = ObjectId(key[0], key[1], name)
        hooks.name = name
        instance = Instance(object_id, namespace.object_class, self._env, database, self._host)
        hooks.instance = instance
        if self.faults is not None:
            instance.inject(self.faults)
            crash = partial(crash_at_commit, self._live)
            database.faults = CommitFaults(self.faults, object_id, crash)
        self._live.add(key, instance)
        return instance

    def _crash_inside(self, instance: Instance) -> None:
        """Crash `instance` from one of its own tasks, as `crash` would from outside: its
        uncommitted writes are lost and its work, the caller's task included, cancelled."""
        self._live.remove(instance)
        discard(instance, crash=True)

    def _aborted(self, instance: Instance, error: BaseException) -> None:
        """`ctx.abort`: reset the object as a failed commit does, with Cloudflare's error."""
        self._commit_failed((instance.id.namespace, str(instance.id)), instance.database, error)

    def _commit_failed(self, key: Key, database: Database, error: BaseException) -> None:
        # The instance's memory may disagree with storage now: rebuild it on next use.
        # Its calls in flight may have written in the lost commit: they get its error.
        # (`ctx.abort` resets the object the same way, with Cloudflare's error.)
        instance = self._live.get(key)
        if instance is not None and instance.database is database:
            self._live.remove(instance)
            discard(instance, crash=True, error=error)

    async def _drop(self, key: Key, *, crash: bool) -> None:
        instance = self._live.pop(key)
        if instance is None:
            return
        await wind_down(discard(instance, crash=crash))


def _refuse_eager_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Raise `RuntimeError` if `loop`'s task factory starts a task inside `create_task`
    (Python 3.12's `asyncio.eager_task_factory` does): the runtime and the helpers start
    tasks that must not run before their caller has set up what they read (a turn's
    registrations are written by a task started with the first of them), so such a loop
    would leave work waiting forever instead."""
    if loop.get_task_factory() is None:
        return
    started = False

    async def probe() -> None:
        nonlocal started
        started = True

    task = loop.create_task(probe())
    if started:
        raise RuntimeError(
            "the event loop's task factory starts tasks eagerly (as "
            "asyncio.eager_task_factory does), and the Runtime needs each task it creates "
            "to start on a later turn of the loop; start it on a loop without that factory"
        )
    task.cancel()


def _run_every(steps: list[Callable[[], object]]) -> None:
    """Run each step even if an earlier one fails; then raise the first failure."""
    failure: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as error:
            logger.error("closing the runtime: %r", error)
            failure = failure or error
    if failure is not None:
        raise failure


def _key_of(target: ObjectStub | ObjectId) -> Key:
    if isinstance(target, ObjectStub):
        target = target.id
    if not isinstance(target, ObjectId):
        raise TypeError(f"expected an ObjectStub or ObjectId, got {type(target).__name__}")
    return (target.namespace, str(target))
