"""Unit-test fixtures: `turn`, a reply being written on a story, for running the main model's tools on it."""

from __future__ import annotations

from uuid import uuid4

import pytest

from domain.application import Changji
from tests.builders import TENANT, StoryBuilder
from tests.unit.draft_turn_support import PREVIOUS, Turn


@pytest.fixture
def turn(app: Changji, story: StoryBuilder) -> Turn:
    _, previous = story.turn("灯塔怎么了？", PREVIOUS)
    reply = app.turns.open_turn(TENANT, story.story_id, uuid4(), uuid4(), "再说一遍。", None, "fake-main").reply
    return Turn(app, story, previous, reply.id)
