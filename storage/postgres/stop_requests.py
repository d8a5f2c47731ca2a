"""Stops asked of turns that another process may be running, as rows of a table: the process that
answers `POST …/stop` may not be the one running the turn (`storage/stop_requests.py` keeps them as
files, for the workers of one data dir)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from uuid import UUID

from storage.postgres.service_db import create_schema, pool
from storage.stop_requests import StopRequests


class PostgresStopRequests(StopRequests):
    def __init__(self, url: str) -> None:
        create_schema(url)
        self.pool = pool(url, 2, "changji-stops")

    def ask(self, reply_id: UUID) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "insert into changji_stop_requests (reply_id, asked_at) values (%s, %s) on conflict do nothing",
                (reply_id, datetime.now(UTC).isoformat()),
            )

    def asked(self, reply_ids: Iterable[UUID]) -> list[UUID]:
        wanted = list(reply_ids)
        if not wanted:
            return []
        with self.pool.connection() as conn:
            rows = conn.execute(
                "select reply_id from changji_stop_requests where reply_id = any(%s)", (wanted,)
            ).fetchall()
        return [row[0] for row in rows]

    def clear(self, reply_id: UUID) -> None:
        with self.pool.connection() as conn:
            conn.execute("delete from changji_stop_requests where reply_id = %s", (reply_id,))

    def close(self) -> None:
        self.pool.close()
