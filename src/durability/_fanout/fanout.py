"""`DurabilityFanout`: durable, independent delivery of each message to static targets.

An accepted message owes one delivery to each of its targets, fixed when it was
enqueued; each target settles its own (ack, retry, dead letter) and the message is
deleted when the last one is settled. Targets run in parallel under the scheduler's
shared permits, one batch per target per pass; a claim is a lease, so work of an
evicted instance is due again after the attempt timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Unpack

from .._clock import now_ms
from .._context import Context
from .._engine import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    DELIVERY_EVENT_TYPES,
    LATEST,
    AttemptPolicy,
    DeliveryRegisteredEvent,
    DurabilityScheduler,
    LifecycleEventType,
    MigrationResult,
    RetryPolicy,
    SchedulerOptionArgs,
    exponential,
    jitter,
    listened_types,
    migrate,
)
from .._errors import FanoutEnqueueError, serialize_error
from .._load import EnqueueResult, LoadSnapshot, RoutingLoad
from .._types import MAX_SAFE_INTEGER
from .._validate import check_callable, check_int, check_positive_int, check_utf8
from .dead_letters import DeadLetterWrites
from .engine import CAPABILITY, FanoutEngine, HostInfo, migrate_storage
from .enqueue import EnqueueRequest, first_attempt_at
from .executor import DeliveryExecutor
from .runs import TargetRuns
from .schema import FANOUT_MIGRATIONS
from .settlement import Settler
from .store import DeliveryStore
from .types import Body, FanoutInput, FanoutTarget, MessageWrite

DEFAULT_RETRIES = RetryPolicy()


def _default_delay(attempt: int) -> float:
    return jitter(exponential(attempt))


class DurabilityFanout(Generic[Body]):
    """Durable fanout of messages to named targets, sharing the object's one alarm.

    Build it in the object's `__init__` (with `scheduler=` or `context=`) so every
    new instance serves the stored deliveries. Removing a target id keeps its work
    (retried every 60 s) until the id returns; a new target never receives messages
    enqueued before it existed.
    """

    def __init__(
        self,
        *,
        targets: Mapping[str, FanoutTarget[Body]],
        scheduler: DurabilityScheduler | None = None,
        context: Context | None = None,
        attempt_timeout_ms: int = DEFAULT_ATTEMPT_TIMEOUT_MS,
        retries: RetryPolicy = DEFAULT_RETRIES,
        max_batch_size: int = 10,
        batch_delay_ms: int = 0,
        dlq: MessageWrite | None = None,
        routing: RoutingLoad | None = None,
        on_lifecycle_event: Callable[[Any], Any] | None = None,
        lifecycle_events: Iterable[str] | None = None,
        **scheduler_options: Unpack[SchedulerOptionArgs],
    ) -> None:
        self._max_batch_size = check_positive_int("max_batch_size", max_batch_size)
        self._batch_delay_ms = _batch_delay(batch_delay_ms)
        self._targets, self._policies = _check_targets(targets, attempt_timeout_ms, retries)
        self._every_target = tuple(sorted(self._targets))
        if dlq is not None:
            check_callable("dlq", dlq)
        if routing is not None and not isinstance(routing, RoutingLoad):
            raise TypeError(f"routing must be a RoutingLoad, got {type(routing).__name__}")
        if on_lifecycle_event is not None:
            check_callable("on_lifecycle_event", on_lifecycle_event)
        listened = listened_types(on_lifecycle_event, lifecycle_events, DELIVERY_EVENT_TYPES)
        self._engine = FanoutEngine(
            scheduler=scheduler,
            context=context,
            options=scheduler_options,
        )
        self._routing = routing if routing is not None else RoutingLoad()
        self._emit = self._engine.emitter(on_lifecycle_event)
        self._registered_heard = LifecycleEventType.REGISTERED in listened
        self._store = DeliveryStore(self._engine)
        dead = DeadLetterWrites(self._engine)
        settler = Settler(self._store, dead, dlq, self._emit, listened)
        self._runs = TargetRuns(
            engine=self._engine,
            store=self._store,
            executor=DeliveryExecutor(
                store=self._store,
                dead=dead,
                settler=settler,
                targets=self._targets,
                routing=self._routing,
            ),
            policies=self._policies,
            max_batch_size=self._max_batch_size,
            emit=self._emit,
            listened=listened,
        )
        self._eager_pending = False
        self._engine.start(self._run_due, self._holding)

    @classmethod
    def migrate(cls, context: Context, target: Any = LATEST) -> MigrationResult:
        """Move only the fanout schema to `target` (`LATEST`, `None` for none, or a name)."""
        return migrate(migrate_storage(context), CAPABILITY, FANOUT_MIGRATIONS, target)

    async def alarm(self, info: HostInfo | None = None) -> None:
        """Run due work of every helper on this fanout's scheduler (the object's alarm)."""
        await self._engine.alarm(info)

    async def load(self) -> LoadSnapshot:
        """Load telemetry; `pending_deliveries` counts every stored delivery obligation."""
        return self._routing.snapshot(self._store.pending_count())

    async def enqueue(
        self,
        messages: FanoutInput[Body] | Sequence[FanoutInput[Body]],
        targets: Sequence[str] | None = None,
    ) -> EnqueueResult[list[str]]:
        """Accept messages atomically for `targets` (default: every configured target).

        Returns the id of every input, duplicates included. Definite input rejections
        come back as `success=False` and store nothing; a storage failure raises,
        because the caller cannot know whether the batch was accepted.
        """
        finish = self._routing.begin("inbound")
        try:
            try:
                request = EnqueueRequest.build(messages, targets, self._targets, self._every_target)
            except Exception as rejection:
                return await self._rejected(finish, rejection)
            now = now_ms()
            try:
                created = await self._store.register(
                    request.entries,
                    request.targets,
                    now,
                    first_attempt_at(now, self._batch_delay_ms),
                )
            except FanoutEnqueueError as rejection:
                return await self._rejected(finish, rejection)
        finally:
            finish()
        if self._registered_heard:
            for registered in created:
                for target in request.targets:
                    self._emit(
                        DeliveryRegisteredEvent(
                            id=registered.entry.id,
                            target=target,
                            generation=registered.generation,
                            timestamp=now,
                            attempt=0,
                        )
                    )
        load = self._routing.snapshot(self._store.pending_count())
        if (
            created
            and self._batch_delay_ms == 0
            and not self._eager_pending
            and not self._runs.holding()
        ):
            # One eager pass serves every enqueue that commits before it starts.
            self._eager_pending = True
            self._engine.in_background(self._eager_pass(), "durability.fanout.failed", {})
        return EnqueueResult(True, request.ids, None, load)

    async def _rejected(
        self, finish: Callable[[], None], rejection: Exception
    ) -> EnqueueResult[list[str]]:
        """A definite rejection; the returned load counts this call as completed."""
        finish()
        return EnqueueResult(False, None, serialize_error(rejection), await self.load())

    # -- delivery passes ----------------------------------------------------------------

    def _holding(self) -> bool:
        """True while a new pass would only wait (see `TargetRuns.holding`)."""
        return self._runs.holding()

    async def _eager_pass(self) -> None:
        self._eager_pending = False
        await self._run_due(now_ms(), None)
        await self._engine.schedule_next_alarm()

    async def _run_due(self, now: int, info: HostInfo | None) -> None:
        """One delivery pass (the participant callback; see `TargetRuns.run_due`)."""
        await self._runs.run_due(now, info)


def _batch_delay(value: object) -> int:
    delay = check_int("batch_delay_ms", value, "a non-negative integer")
    if delay < 0 or delay > MAX_SAFE_INTEGER:
        raise ValueError("batch_delay_ms must be a non-negative integer")
    return delay


def _check_targets(
    targets: object, attempt_timeout_ms: object, retries: object
) -> tuple[dict[str, FanoutTarget[Any]], dict[str, AttemptPolicy]]:
    """Copy and validate the targets; resolve each one's policy over the fanout's."""
    timeout = check_positive_int("attempt_timeout_ms", attempt_timeout_ms)
    if not isinstance(retries, RetryPolicy):
        raise TypeError(f"retries must be a RetryPolicy, got {type(retries).__name__}")
    if not isinstance(targets, Mapping):
        raise TypeError(f"targets must be a mapping, got {type(targets).__name__}")
    copied = dict(targets)
    if not copied:
        raise TypeError("Fanout requires at least one static target")
    policies: dict[str, AttemptPolicy] = {}
    for target_id, target in copied.items():
        if (
            not isinstance(target_id, str)
            or not target_id
            or not isinstance(target, FanoutTarget)
            or callable(target.deliver) == callable(target.storage)
        ):
            raise TypeError(f'Invalid fanout target "{target_id}"')
        check_utf8("target ids", target_id)
        if not isinstance(target.ack_on_return, bool):
            raise TypeError(f"targets.{target_id}.ack_on_return must be a bool")
        target_timeout = timeout
        if target.attempt_timeout_ms is not None:
            target_timeout = check_positive_int(
                f"targets.{target_id}.attempt_timeout_ms", target.attempt_timeout_ms
            )
        policy = retries if target.retries is None else target.retries
        if not isinstance(policy, RetryPolicy):
            raise TypeError(
                f"targets.{target_id}.retries must be a RetryPolicy, got {type(policy).__name__}"
            )
        policies[target_id] = AttemptPolicy(
            target_timeout, policy.max_attempts, policy.delay or _default_delay
        )
    return copied, policies
