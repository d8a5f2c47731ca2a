"""API keys, idempotency records and blobs in PostgreSQL: what `storage/service_db.py` keeps in an SQLite
file, shared here by every process of the service (a key made by one is accepted by all; a keyed
request retried against another process is answered from the record the first one kept)."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from uuid import uuid4

import psycopg
from psycopg_pool import ConnectionPool

from storage.service_db import KEY_PREFIX, StoredResponse, hash_key

SCHEMA = """
create table if not exists changji_api_keys (
    key_hash text primary key, key_id text not null, tenant_id text not null,
    label text not null default '', created_at text not null, revoked boolean not null default false);
create index if not exists changji_api_keys_key_id on changji_api_keys (key_id);
create table if not exists changji_blobs (
    sha256 text primary key, media_type text not null, size bigint not null, data bytea not null,
    created_at text not null);
create table if not exists changji_idempotency (
    tenant_id text not null, key text not null, request_hash text not null,
    status integer not null, body bytea not null, created_at text not null, etag text,
    primary key (tenant_id, key));
create table if not exists changji_stop_requests (reply_id uuid primary key, asked_at text not null);
create table if not exists changji_meta (name text primary key, value text not null);
"""


def pool(url: str, size: int, name: str) -> ConnectionPool:
    """A small pool of autocommitting connections to `url`, open once the server answers (10 s)."""
    made: ConnectionPool = ConnectionPool(
        url, min_size=1, max_size=size, kwargs={"autocommit": True}, name=name, open=False, timeout=30,
        check=ConnectionPool.check_connection,  # (a connection the server dropped is replaced, not handed out)
    )  # fmt: skip
    made.open(wait=True, timeout=10)
    return made


@contextlib.contextmanager
def schema_lock(url: str) -> Iterator[None]:
    """Held while a process makes tables (its own, or eventsourcing's as the application starts): two
    processes starting at once on a new database would race on the catalog."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("select pg_advisory_lock(hashtext('changji schema'))")
        try:
            yield
        finally:
            conn.execute("select pg_advisory_unlock(hashtext('changji schema'))")


def create_schema(url: str) -> None:
    """The service's tables, made where missing (by any process: `if not exists`, under the schema lock),
    and the database's identity (`identity`)."""
    with schema_lock(url), psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute(
            "insert into changji_meta (name, value) values ('identity', %s) on conflict do nothing", (str(uuid4()),)
        )


def identity(url: str) -> str:
    """The database's identity: a random id made with its tables, so that a process can tell its read
    models were folded from this database and not another (or a restored copy of another)."""
    create_schema(url)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select value from changji_meta where name = 'identity'").fetchone()
    assert row is not None
    return str(row[0])


class PostgresServiceDB:
    def __init__(self, url: str) -> None:
        create_schema(url)
        self.pool = pool(url, 4, "changji-service")

    def put_blob(self, data: bytes, media_type: str) -> str:
        digest = hashlib.sha256(data).hexdigest()
        with self.pool.connection() as conn:
            conn.execute(
                "insert into changji_blobs (sha256, media_type, size, data, created_at) values (%s, %s, %s, %s, %s)"
                " on conflict (sha256) do nothing",
                (digest, media_type, len(data), data, _now()),
            )
        return digest

    def blob(self, sha256: str) -> bytes | None:
        with self.pool.connection() as conn:
            row = conn.execute("select data from changji_blobs where sha256 = %s", (sha256,)).fetchone()
        return None if row is None else bytes(row[0])

    def create_key(self, tenant_id: str, label: str = "") -> tuple[str, str]:
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = key[: len(KEY_PREFIX) + 6]
        with self.pool.connection() as conn:
            conn.execute(
                "insert into changji_api_keys (key_hash, key_id, tenant_id, label, created_at)"
                " values (%s, %s, %s, %s, %s)",
                (hash_key(key), key_id, tenant_id, label, _now()),
            )
        return key_id, key

    def first_key(self, tenant_id: str, label: str) -> str | None:
        """A key for the tenant if there is no key at all yet — decided once, whichever processes start
        at the same time."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("select pg_advisory_xact_lock(hashtext('changji first key'))")
            if conn.execute("select 1 from changji_api_keys limit 1").fetchone() is not None:
                return None
            conn.execute(
                "insert into changji_api_keys (key_hash, key_id, tenant_id, label, created_at)"
                " values (%s, %s, %s, %s, %s)",
                (hash_key(key), key[: len(KEY_PREFIX) + 6], tenant_id, label, _now()),
            )
        return key

    def tenant_for(self, key: str) -> str | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                "select tenant_id from changji_api_keys where key_hash = %s and not revoked", (hash_key(key),)
            ).fetchone()
        return str(row[0]) if row else None

    def list_keys(self) -> list[tuple[str, str, str, str, bool]]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "select key_id, tenant_id, label, created_at, revoked from changji_api_keys order by created_at"
            ).fetchall()
        return [(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]

    def revoke(self, key_id: str) -> bool:
        with self.pool.connection() as conn:
            cursor = conn.execute("update changji_api_keys set revoked = true where key_id = %s", (key_id,))
            return cursor.rowcount > 0

    def has_keys(self) -> bool:
        with self.pool.connection() as conn:
            return conn.execute("select 1 from changji_api_keys limit 1").fetchone() is not None

    def recall(self, tenant_id: str, key: str) -> StoredResponse | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                "select request_hash, status, body, etag from changji_idempotency where tenant_id = %s and key = %s",
                (tenant_id, key),
            ).fetchone()
        return StoredResponse(row[0], row[1], bytes(row[2]), row[3]) if row else None

    def reserve(self, tenant_id: str, key: str, request_hash: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "insert into changji_idempotency (tenant_id, key, request_hash, status, body, created_at, etag)"
                " values (%s, %s, %s, 0, '', %s, null) on conflict (tenant_id, key) do nothing",
                (tenant_id, key, request_hash, _now()),
            )

    def release(self, tenant_id: str, key: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "delete from changji_idempotency where tenant_id = %s and key = %s and status = 0", (tenant_id, key)
            )

    def remember(
        self, tenant_id: str, key: str, request_hash: str, status: int, body: bytes, etag: str | None = None
    ) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "insert into changji_idempotency (tenant_id, key, request_hash, status, body, created_at, etag)"
                " values (%s, %s, %s, %s, %s, %s, %s) on conflict (tenant_id, key) do update set"
                " request_hash = excluded.request_hash, status = excluded.status, body = excluded.body,"
                " created_at = excluded.created_at, etag = excluded.etag",
                (tenant_id, key, request_hash, status, body, _now(), etag),
            )

    def close(self) -> None:
        self.pool.close()


def _now() -> str:
    return datetime.now(UTC).isoformat()
