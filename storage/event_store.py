"""eventsourcing's SQLite event store, with commit durability as a setting.

WAL with `synchronous=NORMAL` (the default here) does not fsync on every commit: a committed event
survives the process being killed (kill -9) but may be lost to a power cut or an OS crash within
the last checkpoint interval. `FULL` fsyncs each commit (about 0.4 ms more per write on these
machines). Set `CHANGJI_SQLITE_SYNCHRONOUS=FULL` where power loss must not cost a turn.
"""

from __future__ import annotations

from eventsourcing.persistence import InfrastructureFactoryError
from eventsourcing.sqlite import Factory as _SQLiteFactory
from eventsourcing.sqlite import SQLiteConnection
from eventsourcing.utils import Environment

from storage.checkpoints import LOG_LIMIT_BYTES

MODES = ("NORMAL", "FULL", "EXTRA")


class Factory(_SQLiteFactory):
    SQLITE_SYNCHRONOUS = "SQLITE_SYNCHRONOUS"
    SQLITE_WAL_AUTOCHECKPOINT = "SQLITE_WAL_AUTOCHECKPOINT"  # "0": checkpoints are left to `storage.checkpoints`

    def __init__(self, env: Environment) -> None:
        super().__init__(env)
        mode = (self.env.get(self.SQLITE_SYNCHRONOUS) or "NORMAL").upper()
        if mode not in MODES:
            raise InfrastructureFactoryError(f"SQLITE_SYNCHRONOUS must be one of {', '.join(MODES)}, not {mode!r}")
        pages = self.env.get(self.SQLITE_WAL_AUTOCHECKPOINT) or "1000"
        if not pages.isdigit():
            raise InfrastructureFactoryError(f"SQLITE_WAL_AUTOCHECKPOINT must be a number of pages, not {pages!r}")
        pool = self.datastore.pool
        create = pool._create_connection

        def create_connection() -> SQLiteConnection:
            connection = create()
            connection._sqlite_conn.execute(f"PRAGMA synchronous={mode}")
            connection._sqlite_conn.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
            if int(pages) == 0:  # checkpointed by `storage.checkpoints`, which measures a log by its size
                connection._sqlite_conn.execute(f"PRAGMA journal_size_limit={LOG_LIMIT_BYTES}")
            return connection

        pool._create_connection = create_connection  # type: ignore[method-assign]
