"""API keys, idempotency records and file blobs: service data that is not derived from events.

Keys are 32 random bytes; only their SHA-256 is stored (a fast hash is enough for keys with that
much entropy). Neither keys nor their hashes ever enter the event store or the logs. The idempotency
table remembers the response of a creating POST per (tenant, key) so a retried request is answered
from it instead of creating twice.

Blobs (a card's art and the other files of an imported card) are kept by their SHA-256; events name
them by it. A blob is stored before the event that names it is committed, so an event never names a
missing blob (a failed commit can leave one no event names: harmless, and the same upload reuses it).
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

KEY_PREFIX = "cj_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredResponse:
    request_hash: str
    status: int
    body: bytes
    etag: str | None


class ServiceData(Protocol):
    """What the service keeps beside the events: `ServiceDB` here, or the shared database's
    (`storage/postgres/service_db.py`)."""

    def put_blob(self, data: bytes, media_type: str) -> str: ...
    def blob(self, sha256: str) -> bytes | None: ...
    def create_key(self, tenant_id: str, label: str = "") -> tuple[str, str]: ...
    def first_key(self, tenant_id: str, label: str) -> str | None: ...
    def tenant_for(self, key: str) -> str | None: ...
    def list_keys(self) -> list[tuple[str, str, str, str, bool]]: ...
    def revoke(self, key_id: str) -> bool: ...
    def has_keys(self) -> bool: ...
    def recall(self, tenant_id: str, key: str) -> StoredResponse | None: ...
    def reserve(self, tenant_id: str, key: str, request_hash: str) -> None: ...
    def release(self, tenant_id: str, key: str) -> None: ...
    def remember(
        self, tenant_id: str, key: str, request_hash: str, status: int, body: bytes, etag: str | None = None
    ) -> None: ...
    def close(self) -> None: ...


class ServiceDB:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, uri=path.startswith("file:"))
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=30000")  # (a large blob insert on the other connection may hold it)
        self._blob_lock = threading.Lock()  # blobs on a connection of their own: a large one never holds up a key
        self.blob_conn = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, uri=path.startswith("file:")
        )
        self.blob_conn.execute("PRAGMA busy_timeout=30000")
        self.conn.executescript(
            """
            create table if not exists api_keys (
                key_hash text primary key, key_id text not null, tenant_id text not null,
                label text not null default '', created_at text not null, revoked integer not null default 0);
            create table if not exists blobs (
                sha256 text primary key, media_type text not null, size integer not null, data blob not null,
                created_at text not null);
            create table if not exists idempotency (
                tenant_id text not null, key text not null, request_hash text not null,
                status integer not null, body blob not null, created_at text not null,
                primary key (tenant_id, key));
            """
        )
        columns = {row[1] for row in self.conn.execute("pragma table_info(idempotency)")}
        if "etag" not in columns:  # databases made before answers kept their ETag
            self.conn.execute("alter table idempotency add column etag text")

    def put_blob(self, data: bytes, media_type: str) -> str:
        """Keep `data` under its SHA-256 (once, however often it is put); the hash."""
        digest = hashlib.sha256(data).hexdigest()
        with self._blob_lock, self.blob_conn:
            self.blob_conn.execute(
                "insert or ignore into blobs (sha256, media_type, size, data, created_at) values (?, ?, ?, ?, ?)",
                (digest, media_type, len(data), data, datetime.now(UTC).isoformat()),
            )
        return digest

    def blob(self, sha256: str) -> bytes | None:
        with self._blob_lock:
            row = self.blob_conn.execute("select data from blobs where sha256 = ?", (sha256,)).fetchone()
        return None if row is None else bytes(row[0])

    def create_key(self, tenant_id: str, label: str = "") -> tuple[str, str]:
        """A new key for the tenant; returns (key id, the key itself — shown once, never stored)."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = key[: len(KEY_PREFIX) + 6]
        with self._lock, self.conn:
            self.conn.execute(
                "insert into api_keys (key_hash, key_id, tenant_id, label, created_at) values (?, ?, ?, ?, ?)",
                [hash_key(key), key_id, tenant_id, label, datetime.now(UTC).isoformat()],
            )
        return key_id, key

    def first_key(self, tenant_id: str, label: str) -> str | None:
        """A key for the tenant if there is no key at all yet (the first start): the key, else None."""
        return None if self.has_keys() else self.create_key(tenant_id, label)[1]

    def tenant_for(self, key: str) -> str | None:
        with self._lock:
            row = self.conn.execute(
                "select tenant_id from api_keys where key_hash = ? and revoked = 0", [hash_key(key)]
            ).fetchone()
        return row[0] if row else None

    def list_keys(self) -> list[tuple[str, str, str, str, bool]]:
        with self._lock:
            rows = self.conn.execute(
                "select key_id, tenant_id, label, created_at, revoked from api_keys order by created_at"
            ).fetchall()
        return [(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]

    def revoke(self, key_id: str) -> bool:
        with self._lock, self.conn:
            cursor = self.conn.execute("update api_keys set revoked = 1 where key_id = ?", [key_id])
        return cursor.rowcount > 0

    def has_keys(self) -> bool:
        with self._lock:
            return self.conn.execute("select 1 from api_keys limit 1").fetchone() is not None

    def recall(self, tenant_id: str, key: str) -> StoredResponse | None:
        with self._lock:
            row = self.conn.execute(
                "select request_hash, status, body, etag from idempotency where tenant_id = ? and key = ?",
                [tenant_id, key],
            ).fetchone()
        return StoredResponse(row[0], row[1], row[2], row[3]) if row else None

    def reserve(self, tenant_id: str, key: str, request_hash: str) -> None:
        """Note a keyed request before it runs (status 0: no answer yet), so a retry after a crash is
        checked against the request that was made, body included."""
        with self._lock, self.conn:
            self.conn.execute(
                "insert or ignore into idempotency (tenant_id, key, request_hash, status, body, created_at, etag)"
                " values (?, ?, ?, 0, x'', ?, null)",
                [tenant_id, key, request_hash, datetime.now(UTC).isoformat()],
            )

    def release(self, tenant_id: str, key: str) -> None:
        """Forget a keyed request that ended without an answer worth keeping (an error): it may be sent again."""
        with self._lock, self.conn:
            self.conn.execute(
                "delete from idempotency where tenant_id = ? and key = ? and status = 0", [tenant_id, key]
            )

    def remember(
        self, tenant_id: str, key: str, request_hash: str, status: int, body: bytes, etag: str | None = None
    ) -> None:
        """The answer of a keyed request, kept for its retries (it replaces the note `reserve` made)."""
        with self._lock, self.conn:
            self.conn.execute(
                "insert or replace into idempotency (tenant_id, key, request_hash, status, body, created_at, etag)"
                " values (?, ?, ?, ?, ?, ?, ?)",
                [tenant_id, key, request_hash, status, body, datetime.now(UTC).isoformat(), etag],
            )

    def close(self) -> None:
        self.conn.close()
        self.blob_conn.close()
