"""The schemas of the stream capabilities, fanout and the log: one ordered `Migration`
list per capability (released names and statements are fixed, as in `schemas`)."""

from __future__ import annotations

from typing import Final

from .migrations import Migration

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

LOG_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        name="durability_0006_create_log",
        up=(
            "CREATE TABLE durability_log_records ("
            "offset INTEGER PRIMARY KEY, "
            "dedup_key TEXT NOT NULL UNIQUE, "
            "payload TEXT NOT NULL, "
            "bytes INTEGER NOT NULL, "
            "appended_at INTEGER NOT NULL)",
            "CREATE INDEX durability_log_records_appended_idx "
            "ON durability_log_records (appended_at, offset)",
            "CREATE TABLE durability_log_cursors ("
            "consumer TEXT PRIMARY KEY, "
            "offset INTEGER NOT NULL, "
            "committed_at INTEGER NOT NULL)",
            "CREATE TABLE durability_log_segments ("
            "first_offset INTEGER PRIMARY KEY, "
            "last_offset INTEGER NOT NULL, "
            "locator TEXT NOT NULL, "
            "bytes INTEGER NOT NULL, "
            "flushed_at INTEGER NOT NULL)",
            "CREATE TABLE durability_log_seq ("
            "id INTEGER PRIMARY KEY CHECK (id = 1), "
            "next_offset INTEGER NOT NULL, "
            "total_bytes INTEGER NOT NULL)",
            "INSERT INTO durability_log_seq (id, next_offset, total_bytes) VALUES (1, 0, 0)",
        ),
        down=(
            "DROP TABLE durability_log_seq",
            "DROP TABLE durability_log_segments",
            "DROP TABLE durability_log_cursors",
            "DROP INDEX durability_log_records_appended_idx",
            "DROP TABLE durability_log_records",
        ),
    ),
)
"""Capability "log": records, cursors, segments and the sequence."""

LOG_LEASE_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        name="durability_0007_create_log_leases",
        up=(
            "CREATE TABLE durability_log_leases ("
            "batch_id TEXT PRIMARY KEY, "
            "consumer TEXT NOT NULL, "
            "first_offset INTEGER NOT NULL, "
            "last_offset INTEGER NOT NULL, "
            "state TEXT NOT NULL CHECK (state IN ('active', 'pending', 'acked', 'skipped')), "
            "attempt INTEGER NOT NULL CHECK (attempt >= 1), "
            "expires_at INTEGER NOT NULL, "
            "created_at INTEGER NOT NULL)",
            "CREATE INDEX durability_log_leases_state_idx "
            "ON durability_log_leases (consumer, state, expires_at, first_offset)",
            "CREATE INDEX durability_log_leases_range_idx "
            "ON durability_log_leases (consumer, first_offset)",
            "CREATE TABLE durability_log_allocations ("
            "consumer TEXT PRIMARY KEY, "
            "allocated_offset INTEGER NOT NULL)",
        ),
        down=(
            "DROP TABLE durability_log_allocations",
            "DROP INDEX durability_log_leases_range_idx",
            "DROP INDEX durability_log_leases_state_idx",
            "DROP TABLE durability_log_leases",
        ),
    ),
)
"""Capability "logLeases", only with leases: lease ranges and allocations."""
