"""The alarm times Cloudflare's `setAlarm` accepts, and the errors it raises for others.

`storage.setAlarm(t)` (Cloudflare's spelling) takes milliseconds since the epoch as an
int or a float (cut to a whole millisecond) or a `datetime` (a naive one is UTC, the
Workers' time zone, as `workers-runtime-sdk` converts it). The embedded runtime's own
`set_alarm` keeps the library's rule (an int or an aware `datetime`).
"""

from __future__ import annotations

import math
from datetime import datetime

from ._js_errors import js_error
from ._js_values import MAX_SAFE_INTEGER, datetime_ms

LATEST_ALARM_MS = 9_223_372_036_854
"""The latest alarm time Cloudflare accepts (2**63 nanoseconds, in April 2262)."""

_NOT_A_DATE = (
    "Failed to execute 'setAlarm' on 'DurableObjectStorage': parameter 1 is not of type 'date'."
)


def cloudflare_alarm_ms(value: object) -> int:
    """The alarm time `setAlarm(value)` arms, or the `JsException` Cloudflare raises."""
    if isinstance(value, datetime):
        ms: float = datetime_ms(value)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise js_error("TypeError", _NOT_A_DATE, TypeError)
    elif isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        # Pyodide hands such an int to JavaScript as a BigInt, which is not a date.
        raise js_error("TypeError", _NOT_A_DATE, TypeError)
    else:
        ms = value
    if math.isnan(ms):
        raise js_error(
            "TypeError", "The value cannot be converted because it is not a valid Date.", ValueError
        )
    if ms <= 0:
        raise js_error(
            "TypeError", "setAlarm() cannot be called with an alarm time <= 0", ValueError
        )
    if ms >= LATEST_ALARM_MS + 1:
        raise js_error("TypeError", "This API doesn't support dates after 2189.", ValueError)
    return int(ms)
