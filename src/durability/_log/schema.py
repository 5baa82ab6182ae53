"""The log's tables: records, cursors, segments, and with leases their ranges and
allocations (one `Migration` list each).

Names and statements are fixed once released: a stored history row names them, and an
older library reverts newer ones through the `down` statements stored with them.
"""

from __future__ import annotations

from typing import Final

from .._engine import Migration

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
