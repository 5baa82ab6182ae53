"""The live instances of a runtime: lookup in order of use, the live cap, idle eviction."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from ._catalog_file import Key
from ._instance import Instance
from ._limits import least_recent_idle


def key_of(instance: Instance) -> Key:
    """The key of an instance's object: (namespace, object id)."""
    return (instance.id.namespace, str(instance.id))


class LiveInstances:
    """Live instances by key, least recently used first.

    Past `max_live`, idle instances are evicted, oldest use first; with `idle_evict_ms`,
    an instance idle that long (on the loop's clock) is evicted too. Eviction hands the
    instance to `discard`, once it is no longer registered.
    """

    def __init__(
        self,
        max_live: int,
        idle_evict_ms: int | None,
        discard: Callable[[Instance], object],
    ) -> None:
        self.max_live = max_live
        self._idle_evict_ms = idle_evict_ms
        self._discard = discard
        self._instances: OrderedDict[Key, Instance] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin keeping idle timers on `loop`."""
        self._loop = loop

    def stop(self) -> list[Instance]:
        """Stop every idle timer's future arming; the instances, unregistered."""
        self._loop = None
        instances = list(self._instances.values())
        self._instances.clear()
        return instances

    def get(self, key: Key) -> Instance | None:
        """The live instance of `key`, marked as just used."""
        instance = self._instances.get(key)
        if instance is not None:
            self._instances.move_to_end(key)
        return instance

    def add(self, key: Key, instance: Instance) -> None:
        """Register a new instance (evicting idle ones past the cap); it starts idle."""
        self._instances[key] = instance
        if len(self._instances) > self.max_live:
            for victim in least_recent_idle(self._instances, self.max_live, key):
                self._discard(self._instances.pop(victim))
        self.schedule_idle(instance)

    def instances(self) -> list[Instance]:
        """The live instances, least recently used first (their order is left as is)."""
        return list(self._instances.values())

    def pop(self, key: Key) -> Instance | None:
        """Unregister the instance of `key`, if one is live."""
        return self._instances.pop(key, None)

    def remove(self, instance: Instance) -> bool:
        """Unregister `instance` if it is the live one of its key; whether it was."""
        key = key_of(instance)
        if self._instances.get(key) is not instance:
            return False
        del self._instances[key]
        return True

    def schedule_idle(self, instance: Instance) -> None:
        """Note that `instance` just became idle; its idle timer checks it later.

        One timer per instance, re-armed only when it fires, so busy objects cost no
        timer operations per call.
        """
        loop = self._loop
        if self._idle_evict_ms is None or loop is None:
            return
        instance.idle_since = loop.time()
        if instance.idle_timer is None:
            instance.idle_timer = loop.call_later(
                self._idle_evict_ms / 1000, self._evict_idle, instance
            )

    def _evict_idle(self, instance: Instance, *, settled: bool = False) -> None:
        """The idle timer: evict `instance` if it has been idle for `idle_evict_ms`."""
        instance.idle_timer = None
        loop = self._loop
        if loop is None or self._instances.get(key_of(instance)) is not instance:
            return
        if instance.tasks or instance.idle_since is None or self._idle_evict_ms is None:
            return
        remaining = instance.idle_since + self._idle_evict_ms / 1000 - loop.time()
        if remaining > 0:
            instance.idle_timer = loop.call_later(remaining, self._evict_idle, instance)
        elif not settled:
            # Let every other timer due at this same instant run first: one may be the
            # object's own in-memory timer, which makes it busy again.
            instance.idle_timer = loop.call_later(
                0, lambda: self._evict_idle(instance, settled=True)
            )
        else:
            self.remove(instance)
            self._discard(instance)
