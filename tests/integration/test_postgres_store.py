"""What the processes on one PostgreSQL database share besides the events: the write lock (one holder at a
time across sessions, reentrant within one, a waiter let in when it is let go), the lead (one leader; it
passes on when the leader lets go or its connection ends, and the leader is told it lost it), keys,
idempotency records and blobs as the SQLite file keeps them, stop requests, a log whose positions have
gaps (a transaction that took an id and rolled back), and URLs whose passwords never reach a message."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from eventsourcing.persistence import OperationalError
from pydantic import ValidationError

from api.cli import _banner
from api.settings import Settings
from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.leadership import Duty, Leadership
from storage.postgres import check_url, event_store_env, redacted
from storage.postgres.event_store import Recorder
from storage.postgres.locks import AdvisoryLeaderLock, AdvisoryWriteLock
from storage.postgres.notifications import PostgresNotifications
from storage.postgres.service_db import PostgresServiceDB
from storage.postgres.stop_requests import PostgresStopRequests
from tests.builders import StoryBuilder
from tests.postgres_server import GivenServer, PrivateServer

Server = GivenServer | PrivateServer


@pytest.fixture
def url(postgres_server: Server) -> str:
    return postgres_server.new_database()


def test_the_write_lock_is_held_by_one_session_at_a_time_and_lets_a_waiter_in(url: str) -> None:
    first, second = AdvisoryWriteLock(url), AdvisoryWriteLock(url)  # (two processes' worth: two sessions)
    order: list[str] = []
    try:
        with first:
            with first:  # reentrant
                assert not second.try_enter()
                waiter = threading.Thread(
                    target=lambda: (second.__enter__(), order.append("second"), second.__exit__(None, None, None))
                )
                waiter.start()
                time.sleep(0.2)
                assert order == []  # still held (the inner release did not let go)
            time.sleep(0.2)
            assert order == []
            order.append("first done")
        waiter.join(5)
        assert order == ["first done", "second"] and second.waits == 1
        assert first.try_enter()
        first.__exit__(None, None, None)
    finally:
        first.close()
        second.close()


def test_one_leader_and_the_lead_passes_on_when_it_lets_go_or_its_connection_ends(url: str) -> None:
    first, second = AdvisoryLeaderLock(url), AdvisoryLeaderLock(url)
    try:
        assert first.try_take() and not second.try_take()
        assert first.still_held() and first.held
        first.release()
        assert second.try_take() and not first.try_take()
        conn = second._session.conn
        assert conn is not None
        with psycopg.connect(url, autocommit=True) as admin:  # the server ends the leader's session
            admin.execute("select pg_terminate_backend(%s)", (conn.info.backend_pid,))
        assert not second.still_held() and not second.held
        assert first.try_take()  # the lock went with the session
    finally:
        first.release()
        second.release()


async def test_a_leader_that_lost_its_lock_stops_its_duties_and_another_takes_them_up(url: str) -> None:
    running: dict[str, int] = {"a": 0, "b": 0}

    def duties(name: str) -> list[Duty]:
        async def start() -> None:
            running[name] += 1

        async def stop() -> None:
            running[name] -= 1

        return [Duty("jobs", start, stop)]

    a = Leadership(AdvisoryLeaderLock(url), duties("a"), retry_seconds=0.05)
    b = Leadership(AdvisoryLeaderLock(url), duties("b"), retry_seconds=0.05)
    await a.start()
    await b.start()
    try:
        assert running == {"a": 1, "b": 0} and a.leading and not b.leading
        lock = a.lock
        assert isinstance(lock, AdvisoryLeaderLock) and lock._session.conn is not None
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("select pg_terminate_backend(%s)", (lock._session.conn.info.backend_pid,))
        for _ in range(100):
            if running == {"a": 0, "b": 1}:
                break
            await asyncio.sleep(0.05)
        assert running == {"a": 0, "b": 1} and b.leading and not a.leading
    finally:
        await a.stop()
        await b.stop()


def test_keys_idempotency_records_and_blobs_are_kept_as_the_sqlite_file_keeps_them(url: str) -> None:
    db, other = PostgresServiceDB(url), PostgresServiceDB(url)  # (two processes)
    try:
        assert not db.has_keys()
        key_id, key = db.create_key("tenant-a", "first")
        assert other.tenant_for(key) == "tenant-a" and other.tenant_for(key + "x") is None
        assert [(k, t, label, revoked) for k, t, label, _, revoked in other.list_keys()] == [
            (key_id, "tenant-a", "first", False)
        ]
        assert other.revoke(key_id) and not other.revoke("cj_nope")
        assert db.tenant_for(key) is None
        db.reserve("tenant-a", "k1", "hash-1")
        held = other.recall("tenant-a", "k1")
        assert held is not None and held.status == 0 and held.request_hash == "hash-1"
        other.reserve("tenant-a", "k1", "hash-2")  # a second reservation changes nothing
        assert db.recall("tenant-a", "k1") == held
        db.release("tenant-a", "k1")
        assert other.recall("tenant-a", "k1") is None
        db.remember("tenant-a", "k2", "hash-3", 201, b'{"id": 1}', '"7"')
        answer = other.recall("tenant-a", "k2")
        assert answer is not None and (answer.status, answer.body, answer.etag) == (201, b'{"id": 1}', '"7"')
        db.release("tenant-a", "k2")  # an answered request is not forgotten
        assert other.recall("tenant-a", "k2") == answer and other.recall("tenant-b", "k2") is None
        data = bytes(range(256)) * 10
        digest = db.put_blob(data, "image/png")
        assert other.put_blob(data, "image/png") == digest and other.blob(digest) == data
        assert db.blob("0" * 64) is None
    finally:
        db.close()
        other.close()


def test_a_stop_asked_by_one_process_is_seen_by_another_and_cleared(url: str) -> None:
    asking, running = PostgresStopRequests(url), PostgresStopRequests(url)
    try:
        first, second = uuid4(), uuid4()
        asking.ask(first)
        asking.ask(first)
        assert running.asked([first, second]) == [first] and running.asked([]) == []
        running.clear(first)
        assert asking.asked([first]) == []
    finally:
        asking.close()
        running.close()


def test_the_read_models_fold_past_a_gap_in_the_logs_positions(url: str, tmp_path: Path) -> None:
    app, reader = Changji(env=event_store_env(url)), None
    try:
        story = StoryBuilder.start(app)
        story.turn("灯还亮着吗？", "亮着。")
        with psycopg.connect(url, autocommit=True) as conn:  # an id taken by a transaction that rolled back
            conn.execute("select nextval(pg_get_serial_sequence('changji_events', 'notification_id'))")
        story.turn("船呢？", "明天来。")
        positions = [n.id for n in app.recorder.select_notifications(start=1, limit=100)]
        assert any(b - a > 1 for a, b in itertools.pairwise(positions))  # the gap is there
        reader = PostgresNotifications.of(app, url)
        store = ReadModels(tmp_path / "read_models.sqlite")
        runner = ProjectionRunner(app, store, reader)
        assert runner.catch_up(batch=1) == positions[-1]  # (one event a batch: one batch starts past the gap)
        texts = [row["text"] for row in store.db.query("select text from node_texts order by seq")]
        assert "明天来。" in texts and "灯还亮着吗？" in texts
    finally:
        if reader is not None:
            reader.close()
        app.close()


def test_a_save_is_one_statement_that_locks_the_table_so_ids_commit_in_order(url: str) -> None:
    """A transaction that only inserts (a row-exclusive lock) does not hold up a plain insert, but it holds
    up a save: the save locks the table first, so no later id can commit before an earlier one."""
    app = Changji(env=event_store_env(url))
    story = StoryBuilder.start(app)
    done = threading.Event()
    try:
        with psycopg.connect(url) as other:
            other.execute("lock table changji_events in row exclusive mode")  # (as an insert in flight holds it)
            saving = threading.Thread(target=lambda: (story.turn("灯还亮着吗？", "亮着。"), done.set()))
            saving.start()
            assert not done.wait(0.5)  # waits for the other transaction
            other.rollback()
        assert done.wait(10)
        saving.join(10)
        with psycopg.connect(url) as conn:
            bodies = conn.execute("select prosrc from pg_proc where proname = 'changji_insert_events'").fetchall()
        assert len(bodies) == 1 and "LOCK TABLE" in bodies[0][0]  # (the save went through the function)
    finally:
        app.close()


def test_an_insert_that_fails_is_not_tried_again(url: str) -> None:
    """(A commit made as its connection dropped would be found by a retry and called a conflict.)"""
    app = Changji(env=event_store_env(url))
    try:
        assert isinstance(app.recorder, Recorder)
        attempts: list[int] = []
        original = app.recorder.datastore.get_connection

        def broken() -> Any:
            attempts.append(1)
            raise OperationalError("the connection dropped")  # (what eventsourcing's retry would catch)

        app.recorder.datastore.get_connection = broken  # type: ignore[method-assign]
        with pytest.raises(Exception, match="dropped"):
            StoryBuilder.start(app)
        assert len(attempts) == 1
        app.recorder.datastore.get_connection = original  # type: ignore[method-assign]
    finally:
        app.close()


def test_database_urls_are_checked_and_their_passwords_kept_out_of_messages() -> None:
    assert check_url("postgresql://u:p@db.example:5433/story")
    assert check_url("postgresql://u@/story?host=/run/postgresql")
    for bad, why in (
        ("mysql://u:secret@h/db", "starts with postgresql://"),
        ("postgresql://u:secret@h", "names its database"),
        ("postgresql://u:secret@h:99999/db", "port"),
        ("postgresql://u:secret@/db", "names its host"),
    ):
        with pytest.raises(ValueError, match=why) as raised:
            check_url(bad)
        assert "secret" not in str(raised.value)
    assert redacted("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    env = event_store_env("postgresql://us%40er:p%3Ass@h:6000/the%20db")
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DBNAME"]) == ("us@er", "p:ss", "the db")
    assert env["POSTGRES_PORT"] == "6000" and env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"
    settings = Settings(database_url="postgresql://u:p@h/db")
    assert settings.persistence == "postgresql" and settings.shared
    with pytest.raises(ValueError, match="PERSISTENCE=memory"):
        Settings(database_url="postgresql://u:p@h/db", persistence="memory")
    with pytest.raises(ValueError, match="DATABASE_URL"):
        Settings(persistence="postgresql")
    with pytest.raises(ValueError, match="one `changji serve` per core"):
        Settings(database_url="postgresql://u:p@h/db", workers=2)
    with pytest.raises(ValueError, match="sslmode") as raised:  # (libpq's environment says those)
        check_url("postgresql://u:secret@h/db?sslmode=require&password=secret2")
    assert "secret" not in str(raised.value)
    kept = Settings(database_url="postgresql://u:secret@h/db")
    assert "secret" not in repr(kept) and "secret" not in str(kept.model_dump())
    assert kept.database == "postgresql://u:secret@h/db"
    for bad in ({"workers": 2}, {"persistence": "memory"}, {"port": -1}):
        with pytest.raises(ValidationError) as failed:
            Settings(database_url="postgresql://u:secret@h/db", **bad)
        assert "secret" not in str(failed.value)


def test_the_banner_names_the_database_without_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    _banner(Settings(database_url="postgresql://u:secret@db.example/story"), "none")
    out = capsys.readouterr().out
    assert "PostgreSQL at postgresql://u:***@db.example/story" in out and "secret" not in out
