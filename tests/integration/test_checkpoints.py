"""WAL checkpoints off the write path: the writing connections never checkpoint inside a commit, and
the service's checkpointer keeps the logs from growing past the usual 1,000 pages."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from uuid import uuid4

from api.bootstrap import bootstrap
from api.settings import Settings
from domain.values import StorySettings
from storage.checkpoints import CHECKPOINT_SECONDS, LOG_LIMIT_BYTES, Checkpointer
from tests.builders import TENANT, a_card


def a_log(path: Path) -> sqlite3.Connection:
    """A writing connection set up as the service sets up its own."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"PRAGMA journal_size_limit={LOG_LIMIT_BYTES}")
    conn.execute("create table t (x blob)")
    return conn


def write_pages(conn: sqlite3.Connection, pages: int) -> None:
    conn.execute("BEGIN")
    conn.executemany("insert into t values (?)", [(os.urandom(3000),) for _ in range(pages)])
    conn.execute("COMMIT")


def wal_bytes(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


def test_a_log_past_its_threshold_is_checkpointed_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    conn = a_log(path)
    checkpointer = Checkpointer([str(path)], pages=400)  # above what LOG_LIMIT_BYTES holds, as PAGES is
    write_pages(conn, 300)
    assert checkpointer.run() == 0 and checkpointer.checkpoints == 0  # under the threshold
    write_pages(conn, 200)
    size = wal_bytes(path)
    assert checkpointer.run() == 1
    assert checkpointer.run() == 0  # not written since
    write_pages(conn, 1)  # the log starts over from its beginning, cut back to the limit
    assert wal_bytes(path) <= LOG_LIMIT_BYTES < size
    assert checkpointer.run() == 0  # so one new frame is not mistaken for a full log
    write_pages(conn, 450)
    assert checkpointer.run() == 1
    assert conn.execute("select count(*) from t").fetchone()[0] == 951
    checkpointer.close()


def test_without_checkpoints_the_same_writes_grow_the_log(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    conn = a_log(path)
    write_pages(conn, 300)
    size = wal_bytes(path)
    write_pages(conn, 250)
    assert wal_bytes(path) > size  # what the test above would see if nothing checkpointed


async def test_a_started_service_checkpoints_both_logs_in_the_background(tmp_path: Path) -> None:
    svc = bootstrap(Settings(data_dir=tmp_path / "data"))
    assert svc.checkpointer is not None
    svc.checkpointer.pages = 5
    await svc.start()
    try:
        assert svc.store.writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        with svc.app.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            assert cursor.fetchone()[0] == 0
        for _ in range(20):
            await svc.executor.write(svc.app.cards.create_card, uuid4(), TENANT, a_card(), StorySettings())
        deadline = asyncio.get_running_loop().time() + CHECKPOINT_SECONDS + 5
        while svc.checkpointer.checkpoints < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        assert svc.checkpointer.checkpoints >= 2  # the event store's log and the read models'
    finally:
        await svc.close()


def test_one_shot_commands_keep_sqlites_own_checkpoints(tmp_path: Path) -> None:
    svc = bootstrap(Settings(data_dir=tmp_path / "data"), background_checkpoints=False)
    try:
        assert svc.checkpointer is None
        assert svc.store.writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
        with svc.app.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            assert cursor.fetchone()[0] == 1000
    finally:
        asyncio.run(svc.close())
