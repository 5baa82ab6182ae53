"""The fanout's tables: manifests, deliveries and the sequence (its `Migration` list).

Names and statements are fixed once released: a stored history row names them, and an
older library reverts newer ones through the `down` statements stored with them.
"""

from __future__ import annotations

from typing import Final

from .._engine import Migration

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
)
"""Capability "fanout": manifests, deliveries and the sequence.

0011 leaves the deliveries table two indexes instead of three: `status` is always
'pending' (its CHECK), so no index needs it, and nothing reads deliveries by creation
time. Each delivery written, claimed or deleted then touches fewer index entries."""
