"""Where the email queue's archive and dead letters go: a bucket of JSON entries by key.

Two interchangeable stores with the same async methods (`put`, `get`, `list`,
`delete`): `FileStore`, files in a local directory (a local run with the
`STORAGE_DIR` var set), and `Store`, a Durable Object standing in for a bucket such as
R2 on Cloudflare, where Workers have no disk. Both refuse to overwrite a key, because
the fanout may write the same delivery twice (at least once) and the first copy is
the one to keep.
"""

import json
import os
import uuid
from pathlib import Path
from urllib.parse import quote, unquote

from workers import DurableObject

from durability.cloudflare import adapt


class FileStore:
    """One JSON file per key in `directory`, written once and never overwritten."""

    def __init__(self, directory):
        self.directory = Path(directory)

    async def put(self, key, value):
        """Store `value` under `key` unless the key exists; True if this call stored it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / quote(key, safe="")
        temporary = self.directory / f".{uuid.uuid4().hex}.tmp"
        with open(temporary, "w") as file:
            json.dump(value, file)
            file.flush()
            os.fsync(file.fileno())
        try:
            # A hard link appears whole or not at all, and never replaces a file.
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            temporary.unlink()
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return True

    async def get(self, key):
        """The value under `key`, or None."""
        path = self.directory / quote(key, safe="")
        return json.loads(path.read_text()) if path.is_file() else None

    async def list(self, prefix, after=None, limit=100):
        """Up to `limit` entries (`key`, `value`) whose key starts with `prefix`, in key
        order, after the key `after`."""
        if not self.directory.is_dir():
            return []
        keys = sorted(
            key
            for key in (unquote(path.name) for path in self.directory.iterdir())
            if key.startswith(prefix) and (after is None or key > after)
        )
        return [{"key": key, "value": await self.get(key)} for key in keys[:limit]]

    async def delete(self, key):
        """Remove `key`; True if it was there."""
        path = self.directory / quote(key, safe="")
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True


class Store(DurableObject):
    """A bucket of JSON entries by key, in the object's SQL (one object serves them all)."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.sql = adapt(ctx).storage.sql
        self.sql.exec(
            "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    async def put(self, key, value):
        """Store `value` under `key` unless the key exists; True if this call stored it."""
        if self.sql.exec("SELECT 1 FROM entries WHERE key = ?", key).to_list():
            return False
        self.sql.exec("INSERT INTO entries (key, value) VALUES (?, ?)", key, json.dumps(value))
        return True

    async def get(self, key):
        """The value under `key`, or None."""
        rows = self.sql.exec("SELECT value FROM entries WHERE key = ?", key).to_list()
        return json.loads(rows[0]["value"]) if rows else None

    async def list(self, prefix, after=None, limit=100):
        """Up to `limit` entries (`key`, `value`) whose key starts with `prefix`, in key
        order, after the key `after`."""
        rows = self.sql.exec(
            "SELECT key, value FROM entries WHERE substr(key, 1, length(?)) = ? AND key > ?"
            " ORDER BY key LIMIT ?",
            prefix,
            prefix,
            "" if after is None else after,
            limit,
        )
        return [{"key": row["key"], "value": json.loads(row["value"])} for row in rows]

    async def delete(self, key):
        """Remove `key`; True if it was there."""
        existed = bool(self.sql.exec("SELECT 1 FROM entries WHERE key = ?", key).to_list())
        self.sql.exec("DELETE FROM entries WHERE key = ?", key)
        return existed
