"""Exercises the SQL API of a Durable Object; each route answers JSON lines."""

import contextlib
import json
from urllib.parse import urlsplit

from workers import DurableObject, Response, WorkerEntrypoint


def shown(value):
    """A value as text that reads the same on every host."""
    if isinstance(value, bytes | memoryview):
        return f"bytes({bytes(value)!r})"
    if isinstance(value, dict):
        inner = ", ".join(f"{key!r}: {shown(item)}" for key, item in value.items())
        return f"{type(value).__name__}({{{inner}}})"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    return repr(value)


def attempt(label, make):
    """`label: result` of `make()`, or `label: raised ...`."""
    try:
        result = make()
    except Exception as error:
        return f"{label}: raised {type(error).__name__}: {error}"
    return f"{label}: {shown(result)}"


class Database(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.sql = ctx.storage.sql

    def fresh(self, table):
        """Table `table` with three rows. Emptied, not dropped: on Cloudflare a cursor
        not read to its end keeps its table locked, even across requests."""
        self.sql.exec(f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY, name TEXT, v)")
        self.sql.exec(f"DELETE FROM {table}")
        self.sql.exec(f"INSERT INTO {table} (name, v) VALUES ('a', 1), ('b', NULL), ('c', 2.5)")

    async def cursors(self):
        self.fresh("rows")
        sql = self.sql
        cursor = sql.exec("SELECT * FROM rows ORDER BY id")
        lines = [
            attempt("next", cursor.next),
            attempt("next value attribute", lambda: cursor.next().value.name),
            attempt("next", cursor.next),
            attempt("next at end", cursor.next),
            attempt("next again", cursor.next),
            attempt("rows", lambda: [row for row in sql.exec("SELECT * FROM rows")]),
            attempt("row attributes", lambda: [r.name for r in sql.exec("SELECT name FROM rows")]),
            attempt("row items", lambda: [r["v"] for r in sql.exec("SELECT v FROM rows")]),
            attempt("toArray", lambda: sql.exec("SELECT * FROM rows").toArray()),
            attempt("raw toArray", lambda: sql.exec("SELECT * FROM rows").raw().toArray()),
            attempt("raw next", lambda: sql.exec("SELECT * FROM rows").raw().next()),
            attempt("one", lambda: sql.exec("SELECT * FROM rows WHERE id = 2").one()),
            attempt("one of none", lambda: sql.exec("SELECT * FROM rows WHERE id = 9").one()),
            attempt("one of many", lambda: sql.exec("SELECT * FROM rows").one()),
            attempt("columnNames", lambda: sql.exec("SELECT id, name AS n FROM rows").columnNames),
            attempt("toArray twice", lambda: _twice(sql.exec("SELECT id FROM rows"))),
            attempt("same column twice", lambda: sql.exec("SELECT 1 AS a, 2 AS a").toArray()),
            attempt("blob", lambda: bytes(sql.exec("SELECT x'00ff' AS b").one().b)),
            attempt("databaseSize is an int", lambda: type(sql.databaseSize).__name__),
        ]
        return lines

    async def bindings(self):
        self.fresh("bound")
        sql = self.sql
        query = "SELECT typeof(?1) AS t, ?1 AS v"
        cases = [
            ("None", None),
            ("float", 2.5),
            ("text", "é"),
            ("bytes", b"\x01\x02"),
            ("2**53 - 2", 2**53 - 2),
            ("-(2**53 - 2)", -(2**53 - 2)),
            ("2**53", 2**53),
            ("-(2**53)", -(2**53)),
            ("tuple", (1,)),
        ]
        lines = [
            attempt(
                label,
                lambda b=b: sql.exec(
                    query if not isinstance(b, int) else "SELECT ?1 AS v", b
                ).one(),
            )
            for label, b in cases
        ]
        lines += [
            attempt("too few", lambda: sql.exec("SELECT ? AS v")),
            attempt("too many", lambda: sql.exec("SELECT 1 AS v", 1)),
            attempt("100 parameters", lambda: len(sql.exec(_params(100), *range(100)).one())),
            attempt("101 parameters", lambda: sql.exec(_params(101), *range(101))),
        ]
        return lines

    async def statements(self):
        self.fresh("stated")
        sql = self.sql
        return [
            attempt("two statements", lambda: sql.exec("SELECT 1 AS a; SELECT 2 AS b").toArray()),
            attempt("last bound", lambda: sql.exec("SELECT 1; SELECT ? AS b", 5).toArray()),
            attempt("first bound", lambda: sql.exec("SELECT ?; SELECT 2", 1)),
            attempt("first has parameter", lambda: sql.exec("SELECT ?; SELECT 2")),
            attempt("empty", lambda: sql.exec("")),
            attempt("a number", lambda: sql.exec(5)),
            attempt("None", lambda: sql.exec(None)),
            attempt("True", lambda: sql.exec(True)),
            attempt("comment only", lambda: sql.exec("-- nothing")),
            attempt("syntax", lambda: sql.exec("SELEC 1")),
            attempt("syntax later", lambda: sql.exec("SELECT 1 FROM WHERE x")),
            attempt("syntax in second", lambda: sql.exec("SELECT 1; SELEC 2")),
            attempt("incomplete", lambda: sql.exec("SELECT (1")),
            attempt("no table", lambda: sql.exec("SELECT * FROM nope")),
            attempt("unique", lambda: sql.exec("INSERT INTO stated (id) VALUES (1)")),
            attempt("not null", lambda: _not_null(sql)),
            attempt("BEGIN", lambda: sql.exec("BEGIN")),
            attempt("savepoint", lambda: sql.exec("SAVEPOINT x")),
            attempt("commit", lambda: sql.exec("COMMIT")),
            attempt("long statement", lambda: sql.exec("SELECT '" + "x" * 100_000 + "'")),
            attempt("101 columns", lambda: sql.exec(_columns(101))),
            attempt("100 columns", lambda: sql.exec(_columns(100)).toArray()),
            attempt("LIKE pattern of 51", lambda: sql.exec("SELECT 'a' LIKE ?", "%" * 51)),
            attempt(
                "LIKE pattern of 50", lambda: sql.exec("SELECT 'a' LIKE ? AS m", "%" * 50).one()
            ),
        ]

    async def transactions(self):
        self.fresh("changed")
        sql = self.sql
        storage = self.ctx.storage

        def python_error():
            sql.exec("INSERT INTO changed (name) VALUES ('lost')")
            raise KeyError("no")

        def sql_error():
            sql.exec("INSERT INTO changed (name) VALUES ('lost')")
            sql.exec("SELEC")

        def nested():
            sql.exec("INSERT INTO changed (name) VALUES ('outer')")
            with contextlib.suppress(KeyError):
                storage.transactionSync(python_error)
            return sql.exec("SELECT count(*) AS n FROM changed").one().n

        return [
            attempt("value", lambda: storage.transactionSync(lambda: 42)),
            attempt("python error", lambda: storage.transactionSync(python_error)),
            attempt("sql error", lambda: storage.transactionSync(sql_error)),
            attempt("not callable", lambda: storage.transactionSync(5)),
            attempt("nested", lambda: storage.transactionSync(nested)),
            attempt(
                "names", lambda: [r.name for r in sql.exec("SELECT name FROM changed ORDER BY id")]
            ),
        ]

    async def add(self, name):
        self.sql.exec("CREATE TABLE IF NOT EXISTS kept (name TEXT)")
        self.sql.exec("INSERT INTO kept VALUES (?)", name)
        return [row.name for row in self.sql.exec("SELECT name FROM kept ORDER BY rowid")]


def _twice(cursor):
    return [cursor.toArray(), cursor.toArray()]


def _params(count):
    return "SELECT " + ", ".join("?" * count)


def _columns(count):
    columns = ", ".join(f"c{i}" for i in range(count))
    return f"CREATE TABLE IF NOT EXISTS w{count} ({columns})"


def _not_null(sql):
    sql.exec("CREATE TABLE IF NOT EXISTS nn (x NOT NULL)")
    return sql.exec("INSERT INTO nn VALUES (NULL)")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        route = urlsplit(request.url).path.strip("/")
        db = self.env.DB.getByName("db")
        if route.startswith("add/"):
            return Response(json.dumps(await db.add(route[4:])))
        if route not in ("cursors", "bindings", "statements", "transactions"):
            return Response("unknown route", status=404)
        lines = await getattr(db, route)()
        return Response(json.dumps(lines, indent=1), headers={"content-type": "application/json"})
