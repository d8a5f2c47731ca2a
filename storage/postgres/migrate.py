"""`changji migrate --to postgresql://…`: a SQLite data dir's store copied into an empty PostgreSQL
database — every event in the order of its log (each keeps its aggregate, version, topic and state; the
log's positions are the new database's own), the story snapshots, and the service's own rows (API keys
by their hashes, idempotency records, blobs). The read models are not copied: they are projections, and
each process on the database folds its own from the log at its first start.

The source is only read. A destination that holds any event is refused (a second copy would give every
aggregate two histories). The copy holds the database's write lock throughout (no process writes
meanwhile) and marks the database as being copied into until it is done: a copy cut short leaves a
database that `changji serve` refuses to start on, to be dropped and made again before the copy runs once
more.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent

from storage.postgres.locks import AdvisoryWriteLock
from storage.postgres.service_db import create_schema, schema_lock

BATCH = 1000
BLOB_BATCH = 50  # service rows copied at a time (a blob may be megabytes)
SERVICE_TABLES = {  # SQLite's table → PostgreSQL's, with the columns copied
    "api_keys": ("changji_api_keys", ("key_hash", "key_id", "tenant_id", "label", "created_at", "revoked")),
    "idempotency": (
        "changji_idempotency", ("tenant_id", "key", "request_hash", "status", "body", "created_at", "etag"),
    ),
    "blobs": ("changji_blobs", ("sha256", "media_type", "size", "data", "created_at")),
}  # fmt: skip


class NotEmpty(ValueError):
    """The destination already holds events."""


@dataclass
class Copied:
    events: int = 0
    snapshots: int = 0
    rows: dict[str, int] | None = None


EVENTS, SERVICE = "events.sqlite", "service.sqlite"  # a data dir's store and its service rows


def count_events(data_dir: Path) -> int:
    """How many events the data dir's store holds."""
    source = sqlite3.connect(f"{(data_dir / EVENTS).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(source.execute("select count(*) from stored_events").fetchone()[0])
    finally:
        source.close()


def copy_data_dir(data_dir: Path, url: str, destination: Any, progress: Callable[[int], None] | None = None) -> Copied:
    """Copy the data dir's store (eventsourcing's SQLite file) and its service rows into the database at
    `url`, whose application `destination` is (its recorders write the events)."""
    events_file, service_file = data_dir / EVENTS, data_dir / SERVICE
    create_schema(url)
    with schema_lock(url), psycopg.connect(url, autocommit=True) as conn:  # (as `serve` looks for the mark)
        if destination.recorder.max_notification_id() is not None:
            unfinished = " (an unfinished copy: drop the database and make it anew)" if copying(url) else ""
            raise NotEmpty(f"the destination database already holds events{unfinished}: migrate into an empty database")
        conn.execute("insert into changji_meta (name, value) values ('copying', 'changji migrate')")
    lock = AdvisoryWriteLock(url)
    try:
        with lock:
            if destination.recorder.max_notification_id() is not None:  # (a process wrote before the lock)
                raise NotEmpty("a process wrote to the destination as the copy began: stop it and drop the database")
            copied = _copy(events_file, service_file, url, destination, progress)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("delete from changji_meta where name = 'copying'")
    finally:
        lock.close()
    return copied


def copying(url: str) -> bool:
    """Whether a `changji migrate` into this database began and has not finished."""
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("select to_regclass('changji_meta') is not null").fetchone()
        if not exists or not exists[0]:
            return False
        return conn.execute("select 1 from changji_meta where name = 'copying'").fetchone() is not None


def _copy(
    events_file: Path, service_file: Path, url: str, destination: Any, progress: Callable[[int], None] | None
) -> Copied:
    copied = Copied(rows={})
    source = sqlite3.connect(f"{events_file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        for batch in _batches(source, "select originator_id, originator_version, topic, state from stored_events"
                              " order by rowid"):  # fmt: skip
            destination.recorder.insert_events(batch)
            copied.events += len(batch)
            if progress is not None:
                progress(len(batch))
        snapshots = getattr(destination, "snapshots", None)
        if snapshots is not None and _has_table(source, "stored_snapshots"):
            for batch in _batches(
                source, "select originator_id, originator_version, topic, state from stored_snapshots"
            ):
                snapshots.recorder.insert_events(batch)
                copied.snapshots += len(batch)
    finally:
        source.close()
    copied.rows = _copy_service_rows(service_file, url) if service_file.exists() else {}
    return copied


def _batches(source: sqlite3.Connection, query: str) -> Iterator[list[StoredEvent]]:
    cursor = source.execute(query)
    while rows := cursor.fetchmany(BATCH):
        yield [StoredEvent(UUID(row[0]), int(row[1]), str(row[2]), bytes(row[3])) for row in rows]


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("select 1 from sqlite_master where type = 'table' and name = ?", [name]).fetchone() is not None


def _copy_service_rows(service_file: Path, url: str) -> dict[str, int]:
    create_schema(url)
    counts: dict[str, int] = {}
    source = sqlite3.connect(f"{service_file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        with psycopg.connect(url) as conn, conn.transaction():
            for table, (target, columns) in SERVICE_TABLES.items():
                if not _has_table(source, table):
                    continue
                present = {row[1] for row in source.execute(f"pragma table_info({table})")}
                chosen = [c for c in columns if c in present]
                cursor_in = source.execute(f"select {', '.join(chosen)} from {table}")
                counts[table] = 0
                while rows := cursor_in.fetchmany(BLOB_BATCH):  # (blobs can be large: a few at a time)
                    if "revoked" in chosen:  # (0/1 there, a boolean here)
                        at = chosen.index("revoked")
                        rows = [(*r[:at], bool(r[at]), *r[at + 1 :]) for r in rows]
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            f"insert into {target} ({', '.join(chosen)}) values ({', '.join('%s' for _ in chosen)})"
                            " on conflict do nothing",
                            rows,
                        )
                    counts[table] += len(rows)
    finally:
        source.close()
    return counts
