"""The engine's own table: the traceback stored beside each record's last error.

Names and statements are fixed once released: a stored history row names them, and an
older library reverts newer ones through the `down` statements stored with them.
"""

from __future__ import annotations

from typing import Final

from .migrations import Migration

STACKS_CAPABILITY: Final = "errorStacks"

ERROR_STACK_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        name="durability_stacks_0001_create_error_stacks",
        up=(
            "CREATE TABLE durability_error_stacks ("
            "record_table TEXT NOT NULL, "
            "record_key TEXT NOT NULL, "
            "generation_id TEXT NOT NULL, "
            "stack TEXT NOT NULL, "
            "PRIMARY KEY (record_table, record_key))",
        ),
        down=("DROP TABLE durability_error_stacks",),
    ),
)
"""Capability "errorStacks": the traceback of each operation's or named alarm's last
error, beside its record (one row per record, of the generation that failed).

A capability of its own so the tables and migration lists shared with the TypeScript
library stay as they are: a database stays readable by a library that does not know
this table."""
