"""Integration fixtures: an event store and read models in SQLite files under tmp_path; `stored_app`, the
event store of the test's store (SQLite, or a PostgreSQL database for a test marked `both_stores`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from storage.notifications import SQLiteNotifications, StoredEvents
from storage.postgres import event_store_env
from storage.postgres.notifications import PostgresNotifications
from tests.builders import StoryBuilder, sqlite_app


@pytest.fixture
def events_path(tmp_path: Path) -> Path:
    return tmp_path / "events.sqlite"


@pytest.fixture
def sqlite_changji(events_path: Path) -> Changji:
    return sqlite_app(events_path)


@pytest.fixture
def stored_app(events_path: Path, database_url: str | None) -> Iterator[Changji]:
    app = sqlite_app(events_path) if database_url is None else Changji(env=event_store_env(database_url))
    yield app
    app.close()


@pytest.fixture
def bulk_reader(stored_app: Changji, database_url: str | None) -> Iterator[StoredEvents]:
    """`stored_app`'s log read in bulk, as the service reads it."""
    app = stored_app
    reader = SQLiteNotifications.of(app) if database_url is None else PostgresNotifications.of(app, database_url)
    assert reader is not None
    yield reader
    reader.close()


@pytest.fixture
def sqlite_story(sqlite_changji: Changji) -> StoryBuilder:
    return StoryBuilder.start(sqlite_changji)


@pytest.fixture
def read_models(tmp_path: Path) -> ReadModels:
    return ReadModels(tmp_path / "read_models.sqlite")


@pytest.fixture
def runner(sqlite_changji: Changji, read_models: ReadModels) -> ProjectionRunner:
    return ProjectionRunner(sqlite_changji, read_models)
