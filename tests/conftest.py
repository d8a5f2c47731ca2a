"""Fixtures shared by every layer; builders live in tests/builders.py."""

from __future__ import annotations

import pytest

from domain.application import Changji
from tests.builders import StoryBuilder, memory_app


@pytest.fixture
def app() -> Changji:
    return memory_app()


@pytest.fixture
def story(app: Changji) -> StoryBuilder:
    return StoryBuilder.start(app)
