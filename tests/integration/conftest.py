"""Integration fixtures: an event store and read models in SQLite files under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder, sqlite_app


@pytest.fixture
def events_path(tmp_path: Path) -> Path:
    return tmp_path / "events.sqlite"


@pytest.fixture
def sqlite_changji(events_path: Path) -> Changji:
    return sqlite_app(events_path)


@pytest.fixture
def sqlite_story(sqlite_changji: Changji) -> StoryBuilder:
    return StoryBuilder.start(sqlite_changji)


@pytest.fixture
def read_models(tmp_path: Path) -> ReadModels:
    return ReadModels(tmp_path / "read_models.sqlite")


@pytest.fixture
def runner(sqlite_changji: Changji, read_models: ReadModels) -> ProjectionRunner:
    return ProjectionRunner(sqlite_changji, read_models)
