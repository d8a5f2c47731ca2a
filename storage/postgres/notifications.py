"""The event store's notification log read in bulk from PostgreSQL: the rows that eventsourcing's
PostgreSQL recorder wrote, decoded as `storage/notifications.py` decodes SQLite's (orjson, the
application's transcodings), on a connection of the reader's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from storage.notifications import StoredEvents, StoredRow
from storage.postgres.locks import ALIVE  # (read under the write lock: a dead peer is known within seconds)


class PostgresNotifications(StoredEvents):
    def __init__(self, url: str, mapper: Any, table: str, schema: str = "public") -> None:
        super().__init__(mapper, table)
        self.url = url
        self._name = sql.Identifier(schema, table)
        self._conn: psycopg.Connection | None = None

    @classmethod
    def of(cls, source: Any, url: str) -> PostgresNotifications | None:
        """A reader for an application whose events are in PostgreSQL, stored as plain JSON."""
        mapper, recorder = getattr(source, "mapper", None), getattr(source, "recorder", None)
        datastore = getattr(recorder, "datastore", None)
        if mapper is None or recorder is None or mapper.compressor or mapper.cipher or datastore is None:
            return None
        if getattr(datastore, "originator_id_type", "") != "uuid":
            return None
        return cls(url, mapper, recorder.events_table_name, getattr(datastore, "schema", "") or "public")

    def _query(self, statement: sql.Composed, args: Sequence[Any]) -> list[Any]:
        for attempt in (1, 2):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10, **ALIVE)
                return self._conn.execute(statement, args).fetchall()
            except psycopg.OperationalError:
                self.close()  # (the server dropped the connection: once more, on a new one)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def rows(self, start: int, limit: int, stop: int | None = None) -> list[StoredRow]:
        query = sql.SQL(
            "select notification_id, translate(originator_id::text, '-', ''), originator_version, topic, state"
            " from {} where notification_id >= %s"
        ).format(self._name)
        args: list[int] = [start]
        if stop is not None:
            query += sql.SQL(" and notification_id <= %s")
            args.append(stop)
        query += sql.SQL(" order by notification_id limit %s")
        return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in self._query(query, [*args, limit])]

    def events_of(self, originator_ids: Sequence[UUID]) -> list[Any]:
        if not originator_ids:
            return []
        query = sql.SQL(
            "select translate(originator_id::text, '-', ''), originator_version, topic, state from {}"
            " where originator_id = any(%s) order by originator_id, originator_version"
        ).format(self._name)
        return [self._event(r[0], r[1], r[2], bytes(r[3])) for r in self._query(query, [list(originator_ids)])]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
