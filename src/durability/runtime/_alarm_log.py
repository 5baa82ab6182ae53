"""Log records for a failed `alarm()` call of the embedded runtime (``durability.runtime``).

A failure that will be retried logs at WARNING and the last one, after which the alarm
is dropped, at ERROR; both with the traceback and the object's name when it is known.
Every record carries `event`, `namespace`, `object_id`, `object_name`, `retry_count`
(the failed call's), `error_name` and `error_message` in `extra`, plus `retry_in_ms`
when a retry was stored.
"""

from __future__ import annotations

import logging
from typing import Any

from .._errors import serialize_error
from ._catalog_file import Key

logger = logging.getLogger("durability.runtime")


def alarm_failed(
    key: Key,
    name: str | None,
    retry_count: int,
    error: BaseException,
    *,
    retry_in_ms: int | None,
    replaced: bool,
) -> None:
    """Log that `alarm()` raised, and what happens next.

    `retry_in_ms` is the delay of the stored retry (`None`: none was stored);
    `replaced` means the object set a new alarm during the call, which supersedes it.
    """
    stored = serialize_error(error)
    where = f'{key[0]} "{name}" ({key[1]})' if name is not None else f"{key[0]}:{key[1]}"
    fields: dict[str, Any] = {
        "namespace": key[0],
        "object_id": key[1],
        "object_name": name,
        "retry_count": retry_count,
        "error_name": stored.name,
        "error_message": stored.message,
    }
    failed = (
        f"alarm() of {where} failed (retry_count={retry_count}): {stored.name}: {stored.message}"
    )
    if replaced:
        fields["event"] = "durability.runtime.alarm_replaced"
        logger.warning(
            "%s; not retried: it set a new alarm during the call",
            failed,
            exc_info=error,
            extra=fields,
        )
    elif retry_in_ms is not None:
        fields.update(event="durability.runtime.alarm_retry", retry_in_ms=retry_in_ms)
        logger.warning(
            "%s; retry %d in %d ms",
            failed,
            retry_count + 1,
            retry_in_ms,
            exc_info=error,
            extra=fields,
        )
    else:
        fields["event"] = "durability.runtime.alarm_dropped"
        logger.error(
            "%s; no retries left, the alarm is dropped", failed, exc_info=error, extra=fields
        )
