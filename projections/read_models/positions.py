"""The read models' `positions` table (how far each follower of the log has come) and the explicit
transactions every writer of the read-model file uses, whichever connection it has."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One explicit transaction on a connection that autocommits otherwise (isolation_level None)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def position(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("select position from positions where name = ?", [name]).fetchone()
    return int(row[0]) if row else 0


def set_position(conn: sqlite3.Connection, name: str, value: int) -> None:
    conn.execute(
        "insert into positions (name, position) values (?, ?) on conflict(name) do update set position ="
        " excluded.position",
        [name, value],
    )


def add(conn: sqlite3.Connection, name: str, value: int) -> None:
    """Add to a running count kept in the table."""
    conn.execute(
        "insert into positions (name, position) values (?, ?) on conflict(name) do update set position ="
        " position + excluded.position",
        [name, value],
    )
