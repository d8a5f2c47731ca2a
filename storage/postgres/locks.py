"""The write lock and the lead across processes that share nothing but a PostgreSQL database: session
advisory locks, each on a connection of its own. The server lets go of a session's locks when its
connection ends, however the process ended (`kill -9` included), so another process takes over.

`AdvisoryWriteLock` serializes the commands of every process, as the SQLite store's `flock` does for
the processes of one data dir (`storage/write_lock.py`): a command decides on the state it saves over.
It has no count in shared memory: the processes ask the event store's log what others wrote
(`service/log_follower.py`, one indexed query). `AdvisoryLeaderLock` elects the process that runs the
job system; a leader whose connection was lost (a restart of the server) is told by `still_held`.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import psycopg
import psycopg.errors

from storage.leadership import LeaderLock
from storage.write_lock import WriteLock

log = logging.getLogger(__name__)
SPACE = 0x63686A69  # the first key of changji's advisory locks ("chji"); the second names the lock
WRITE, LEAD = 1, 2
# a lock's connection is known dead within some 20 s of its peer going silent (a half-open connection
# would otherwise be believed alive for the kernel's 15 minutes): TCP keepalives and a limit on
# unacknowledged data, and no statement may hang longer than a minute
# (the server's side too: it lets a dead session's locks go only once it knows the session is dead)
SERVER_SIDE = (
    "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 -c tcp_user_timeout=20000"
)
ALIVE: dict[str, Any] = {
    "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
    "tcp_user_timeout": 20_000,
    "options": f"{os.environ.get('PGOPTIONS', '')} -c statement_timeout=60000 {SERVER_SIDE}".strip(),
}  # fmt: skip


class _Session:
    """One connection for one lock, made again if the server dropped it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: psycopg.Connection | None = None

    def ask(self, sql: str, key: int) -> bool:
        for attempt in (1, 2):
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10, **ALIVE)
                row = self.conn.execute(sql, (SPACE, key)).fetchone()
                return bool(row[0]) if row and row[0] is not None else True
            except psycopg.errors.QueryCanceled:
                raise  # (a statement past its time: the connection is fine)
            except psycopg.OperationalError:
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error:
                log.debug("closing an advisory lock's connection failed", exc_info=True)
            self.conn = None


class AdvisoryWriteLock(WriteLock):
    """One writer at a time across every process on the database (reentrant within a thread)."""

    def __init__(self, url: str) -> None:
        super().__init__(None)
        self._session = _Session(url)
        self._held = False

    def _acquire(self, wait: bool) -> bool:
        if wait:
            if not self._session.ask("select pg_try_advisory_lock(%s, %s)", WRITE):
                self.waits += 1
                while True:  # (a wait longer than a statement may last is cancelled, and waited again)
                    try:
                        self._session.ask("select pg_advisory_lock(%s, %s) is null", WRITE)  # (void: null)
                        break
                    except psycopg.errors.QueryCanceled:  # (the lock may have been granted as the wait was
                        self._session.close()  # cancelled: the session ends, and anything it held with it)
                        continue
        elif not self._session.ask("select pg_try_advisory_lock(%s, %s)", WRITE):
            return False
        self._held = True
        return True

    def _release(self) -> None:
        if not self._held:
            return
        self._held = False
        try:
            if not self._session.ask("select pg_advisory_unlock(%s, %s)", WRITE):
                log.error("the write lock was not held as it was let go: its connection ended during a command")
        except psycopg.Error:  # the connection is gone, and the lock with it
            log.error("the write lock's connection ended during a command; the server let the lock go with it")
            self._session.close()

    def close(self) -> None:
        self._session.close()


class AdvisoryLeaderLock(LeaderLock):
    """The lead among every process on the database."""

    def __init__(self, url: str) -> None:
        super().__init__(None)
        self._session = _Session(url)
        self._leads = False
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._leads

    def try_take(self) -> bool:
        with self._lock:
            if not self._leads:
                try:
                    self._leads = self._session.ask("select pg_try_advisory_lock(%s, %s)", LEAD)
                except psycopg.Error as error:
                    log.warning("the database did not answer for the lead (%s); asking again later", error)
                    self._leads = False
            return self._leads

    def still_held(self) -> bool:
        """Whether this process still leads: its lock's connection is alive (a server that restarted
        let every lock go)."""
        with self._lock:
            if not self._leads:
                return False
            conn = self._session.conn
            try:
                if conn is None or conn.closed:
                    raise psycopg.OperationalError("no connection")
                conn.execute("select 1")
            except psycopg.Error:
                self._session.close()
                self._leads = False
            return self._leads

    def release(self) -> None:
        with self._lock:
            if self._leads:
                self._leads = False
                try:
                    self._session.ask("select pg_advisory_unlock(%s, %s)", LEAD)
                except psycopg.Error:
                    log.debug("letting go of the lead failed (its connection is gone, and the lock with it)")
            self._session.close()
