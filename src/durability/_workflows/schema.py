"""The workflows' tables and their migrations (run by the engine's migration runner).

- `durability_workflow_instances`: one row per instance. `status` and
  `next_attempt_at` are what the scheduler reads: ``pending`` (it runs at
  `next_attempt_at`), ``idle`` (paused) or ``done`` (terminal). `state` is the status
  Cloudflare reports (queued, running, waiting, waitingForPause, paused, errored,
  terminated, complete); `attempt` counts the runs of this generation; a restart gives
  the instance a new `generation_id`; `claim_alone` is poison isolation's (see
  `WORKFLOW_MIGRATIONS`).
- `durability_workflow_steps`: the journal, one row per step of an instance (`kind`
  ``do``, ``sleep`` or ``wait``, `name`), numbered by `seq` in the order they began.
- `durability_workflow_events`: events sent to an instance and not yet taken by a
  `wait_for_event`.
"""

from __future__ import annotations

from typing import Final

from .._engine import Migration, TableSpec

CAPABILITY: Final = "workflows"

INSTANCES = TableSpec("durability_workflow_instances", "instance_key")
"""The table the scheduler runs (its key column is `instance_key`)."""

WORKFLOW_MIGRATIONS: Final = (
    Migration(
        name="durability_workflows_0001_create",
        up=(
            "CREATE TABLE durability_workflow_instances ("
            "instance_key TEXT PRIMARY KEY, "
            "workflow TEXT NOT NULL, "
            "instance_id TEXT NOT NULL, "
            "generation_id TEXT NOT NULL, "
            "status TEXT NOT NULL CHECK (status = 'pending' OR status = 'idle' "
            "OR status = 'done'), "
            "next_attempt_at INTEGER NOT NULL, "
            "attempt INTEGER NOT NULL DEFAULT 0, "
            "state TEXT NOT NULL, "
            "params TEXT NOT NULL, "
            "output TEXT, "
            "error_name TEXT, "
            "error_message TEXT, "
            "error_stack TEXT, "
            "created_at INTEGER NOT NULL, "
            "started_at INTEGER, "
            "ended_at INTEGER, "
            "paused_at INTEGER, "
            "updated_at INTEGER NOT NULL)",
            "CREATE INDEX durability_workflow_instances_due "
            "ON durability_workflow_instances (status, next_attempt_at)",
            "CREATE TABLE durability_workflow_steps ("
            "instance_key TEXT NOT NULL, "
            "kind TEXT NOT NULL CHECK (kind = 'do' OR kind = 'sleep' OR kind = 'wait'), "
            "name TEXT NOT NULL, "
            "seq INTEGER NOT NULL, "
            "status TEXT NOT NULL, "
            "attempt INTEGER NOT NULL DEFAULT 0, "
            "detail TEXT, "
            "result TEXT, "
            "error_name TEXT, "
            "error_message TEXT, "
            "error_stack TEXT, "
            "started_at INTEGER NOT NULL, "
            "ended_at INTEGER, "
            "wake_at INTEGER, "
            "PRIMARY KEY (instance_key, kind, name))",
            "CREATE TABLE durability_workflow_events ("
            "id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "instance_key TEXT NOT NULL, "
            "type TEXT NOT NULL, "
            "payload TEXT NOT NULL, "
            "sent_at INTEGER NOT NULL)",
            "CREATE INDEX durability_workflow_events_type "
            "ON durability_workflow_events (instance_key, type, id)",
        ),
        down=(
            "DROP TABLE durability_workflow_events",
            "DROP TABLE durability_workflow_steps",
            "DROP TABLE durability_workflow_instances",
        ),
    ),
    Migration(
        name="durability_workflows_0002_interruptions",
        up=(
            "ALTER TABLE durability_workflow_instances ADD COLUMN claim_alone INTEGER",
            "ALTER TABLE durability_workflow_steps "
            "ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE durability_workflow_steps ADD COLUMN spared INTEGER NOT NULL DEFAULT 0",
        ),
        down=(
            "ALTER TABLE durability_workflow_steps DROP COLUMN spared",
            "ALTER TABLE durability_workflow_steps DROP COLUMN interruptions",
            "ALTER TABLE durability_workflow_instances DROP COLUMN claim_alone",
        ),
    ),
)
"""The workflows' schema, oldest first (names and statements never change once released).

0002 adds what poison isolation keeps of a run in flight: on an instance,
`claim_alone` (NULL while no run is claimed; 0 for a run claimed beside others, 1 for
one claimed alone); on a step, `interruptions` (its attempts that never settled: the
process stopped or the object was evicted while it ran) and `spared` (those of them
that ran beside others, which do not count toward its retries)."""
