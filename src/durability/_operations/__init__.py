"""Durable operations: `Durability` and its records, handles and registrations.

`durability` is the capability, `calls` what a handler receives and how an attempt
calls it, `registrations` writes the registrations of one loop
turn together, `control` the writes of one record (cancel, retry, completion),
`records` its reads and `OperationResult`, `handles` the per-operation handle and job,
`schema` the `durability_calls` table's migrations.
"""

from __future__ import annotations

from .calls import DurableCall
from .durability import Durability
from .handles import DurableJob, DurableOperation
from .records import OperationResult
from .schema import OPERATION_MIGRATIONS

__all__ = [
    "OPERATION_MIGRATIONS",
    "Durability",
    "DurableCall",
    "DurableJob",
    "DurableOperation",
    "OperationResult",
]
