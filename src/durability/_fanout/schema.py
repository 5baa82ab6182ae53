"""The fanout's tables: manifests, deliveries and the sequence (its `Migration` list).

Names and statements are fixed once released: a stored history row names them, and an
older library reverts newer ones through the `down` statements stored with them.
"""

from __future__ import annotations

from typing import Final

from .._engine import Migration

_DELIVERY_COLUMNS: Final = (
    "id, message_key, target_id, seq, status, phase, attempt, next_attempt_at, last_error, "
    "last_error_name, created_at, generation_id, dead_lettered_at, dead_letter_reason"
)


def _deliveries_table(name: str, reasons: str, extra: str) -> str:
    """The deliveries table as `name`, its dead-letter reasons checked against `reasons`,
    with the columns `extra` adds."""
    return (
        f"CREATE TABLE {name} ("
        "id TEXT PRIMARY KEY, "
        "message_key TEXT NOT NULL, "
        "target_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, "
        "status TEXT NOT NULL CHECK (status = 'pending'), "
        "phase TEXT NOT NULL CHECK (phase IN ('delivery', 'dead_letter')), "
        "attempt INTEGER NOT NULL DEFAULT 0, "
        "next_attempt_at INTEGER NOT NULL, "
        "last_error TEXT, "
        "last_error_name TEXT, "
        "created_at INTEGER NOT NULL, "
        "generation_id TEXT NOT NULL, "
        "dead_lettered_at INTEGER, "
        f"dead_letter_reason TEXT CHECK (dead_letter_reason IN ({reasons})){extra})"
    )


_DELIVERY_INDEXES: Final = (
    "CREATE INDEX durability_fanout_deliveries_due_idx ON durability_fanout_deliveries "
    "(target_id, phase, attempt, seq, next_attempt_at)",
    "CREATE INDEX durability_fanout_deliveries_next_idx "
    "ON durability_fanout_deliveries (phase, next_attempt_at)",
)

FANOUT_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        name="durability_0005_create_fanout",
        up=(
            "CREATE TABLE durability_fanout_messages ("
            "key TEXT PRIMARY KEY, "
            "id TEXT NOT NULL, "
            "payload TEXT NOT NULL, "
            "targets TEXT NOT NULL, "
            "remaining INTEGER NOT NULL, "
            "seq INTEGER NOT NULL, "
            "created_at INTEGER NOT NULL, "
            "generation_id TEXT NOT NULL)",
            "CREATE TABLE durability_fanout_deliveries ("
            "id TEXT PRIMARY KEY, "
            "message_key TEXT NOT NULL, "
            "target_id TEXT NOT NULL, "
            "seq INTEGER NOT NULL, "
            "status TEXT NOT NULL CHECK (status = 'pending'), "
            "phase TEXT NOT NULL CHECK (phase IN ('delivery', 'dead_letter')), "
            "attempt INTEGER NOT NULL DEFAULT 0, "
            "next_attempt_at INTEGER NOT NULL, "
            "last_error TEXT, "
            "last_error_name TEXT, "
            "created_at INTEGER NOT NULL, "
            "generation_id TEXT NOT NULL, "
            "dead_lettered_at INTEGER, "
            "dead_letter_reason TEXT CHECK (dead_letter_reason IN ('explicit', 'exhausted')))",
            "CREATE INDEX durability_fanout_deliveries_target_idx ON durability_fanout_deliveries "
            "(target_id, phase, status, attempt, seq, next_attempt_at)",
            "CREATE INDEX durability_fanout_deliveries_pending_idx "
            "ON durability_fanout_deliveries (phase, status, next_attempt_at)",
            "CREATE INDEX durability_fanout_deliveries_created_idx "
            "ON durability_fanout_deliveries (created_at)",
            "CREATE TABLE durability_fanout_seq ("
            "id INTEGER PRIMARY KEY CHECK (id = 1), "
            "next_seq INTEGER NOT NULL)",
            "INSERT INTO durability_fanout_seq (id, next_seq) VALUES (1, 0)",
        ),
        down=(
            "DROP TABLE durability_fanout_seq",
            "DROP INDEX durability_fanout_deliveries_created_idx",
            "DROP INDEX durability_fanout_deliveries_pending_idx",
            "DROP INDEX durability_fanout_deliveries_target_idx",
            "DROP TABLE durability_fanout_deliveries",
            "DROP TABLE durability_fanout_messages",
        ),
    ),
    Migration(
        name="durability_0011_fanout_delivery_indexes",
        up=(
            "DROP INDEX durability_fanout_deliveries_created_idx",
            "DROP INDEX durability_fanout_deliveries_pending_idx",
            "DROP INDEX durability_fanout_deliveries_target_idx",
            "CREATE INDEX durability_fanout_deliveries_due_idx ON durability_fanout_deliveries "
            "(target_id, phase, attempt, seq, next_attempt_at)",
            "CREATE INDEX durability_fanout_deliveries_next_idx "
            "ON durability_fanout_deliveries (phase, next_attempt_at)",
        ),
        down=(
            "DROP INDEX durability_fanout_deliveries_next_idx",
            "DROP INDEX durability_fanout_deliveries_due_idx",
            "CREATE INDEX durability_fanout_deliveries_target_idx ON durability_fanout_deliveries "
            "(target_id, phase, status, attempt, seq, next_attempt_at)",
            "CREATE INDEX durability_fanout_deliveries_pending_idx "
            "ON durability_fanout_deliveries (phase, status, next_attempt_at)",
            "CREATE INDEX durability_fanout_deliveries_created_idx "
            "ON durability_fanout_deliveries (created_at)",
        ),
    ),
    Migration(
        name="durability_0016_fanout_interruptions",
        up=(
            _deliveries_table(
                "durability_fanout_deliveries_next",
                "'explicit', 'exhausted', 'interrupted'",
                ", claim_alone INTEGER, interruptions INTEGER NOT NULL DEFAULT 0, "
                "spared INTEGER NOT NULL DEFAULT 0",
            ),
            f"INSERT INTO durability_fanout_deliveries_next ({_DELIVERY_COLUMNS}) "
            f"SELECT {_DELIVERY_COLUMNS} FROM durability_fanout_deliveries",
            "DROP TABLE durability_fanout_deliveries",
            "ALTER TABLE durability_fanout_deliveries_next RENAME TO durability_fanout_deliveries",
            *_DELIVERY_INDEXES,
        ),
        down=(
            _deliveries_table(
                "durability_fanout_deliveries_previous", "'explicit', 'exhausted'", ""
            ),
            # A message dead-lettered for its interruptions had exhausted its attempts.
            f"INSERT INTO durability_fanout_deliveries_previous ({_DELIVERY_COLUMNS}) "
            "SELECT id, message_key, target_id, seq, status, phase, attempt, next_attempt_at, "
            "last_error, last_error_name, created_at, generation_id, dead_lettered_at, "
            "CASE dead_letter_reason WHEN 'interrupted' THEN 'exhausted' "
            "ELSE dead_letter_reason END FROM durability_fanout_deliveries",
            "DROP TABLE durability_fanout_deliveries",
            "ALTER TABLE durability_fanout_deliveries_previous "
            "RENAME TO durability_fanout_deliveries",
            *_DELIVERY_INDEXES,
        ),
    ),
)
"""Capability "fanout": manifests, deliveries and the sequence.

0011 leaves the deliveries table two indexes instead of three: `status` is always
'pending' (its CHECK), so no index needs it, and nothing reads deliveries by creation
time. Each delivery written, claimed or deleted then touches fewer index entries. 0016
rebuilds the deliveries table with what poison isolation keeps of a delivery in flight
(`claim_alone`, `interruptions`, `spared`, as operations' 0014) and the dead-letter
reason `interrupted`; its down rebuilds the 0011 table, an `interrupted` reason read as
`exhausted`."""
