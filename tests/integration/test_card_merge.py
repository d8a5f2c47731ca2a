"""Cards merged into others: a merge cut short is finished by asking again, also once the card it went
to was merged in turn; a card whose merges end at a deleted card may be merged anew; a moved story keeps
the user's name it had."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from domain.application import Changji
from domain.errors import CardMergeError, CardNotFoundError
from domain.values import StorySettings
from tests.builders import TENANT, StoryBuilder, a_card


def a_card_named(app: Changji, name: str, user: str = "User") -> UUID:
    card_id = uuid4()
    app.cards.create_card(card_id, TENANT, a_card(name=name), StorySettings().merged({"user_name": user}))
    return card_id


def test_a_merge_cut_short_is_finished_after_its_card_was_merged_in_turn(sqlite_changji: Changji) -> None:
    app = sqlite_changji
    story = StoryBuilder.start(app)
    b, c = a_card_named(app, "B"), a_card_named(app, "C")
    app.cards.merge_card(TENANT, story.card_id, b)  # (cut short: its story not moved)
    app.cards.merge_card(TENANT, b, c)
    with pytest.raises(CardMergeError, match=str(c)):
        app.cards.merge_card(TENANT, story.card_id, a_card_named(app, "D"))
    assert app.cards.merge_card(TENANT, story.card_id, c) == 0  # where its merges lead now: nothing to write
    with pytest.raises(CardMergeError):
        app.stories.move_stories(TENANT, [story.story_id], story.card_id, b)  # (b is not where they lead)
    moved = app.stories.move_stories(TENANT, [story.story_id], story.card_id, c)
    assert moved.value == 1 and app.story(TENANT, story.story_id).card_id == c
    assert app.merge_target(story.card_id) == c


def test_a_card_whose_merges_end_at_a_deleted_card_may_be_merged_anew(sqlite_changji: Changji) -> None:
    app = sqlite_changji
    story = StoryBuilder.start(app)
    b, c = a_card_named(app, "B"), a_card_named(app, "C")
    app.cards.merge_card(TENANT, story.card_id, b)
    app.cards.delete_card(TENANT, b)
    with pytest.raises(CardNotFoundError):
        app.merge_target(story.card_id)
    app.cards.merge_card(TENANT, story.card_id, c)
    assert app.stories.move_stories(TENANT, [story.story_id], story.card_id, c).value == 1
    assert app.card_of(app.story(TENANT, story.story_id)).id == c


def test_a_moved_story_keeps_the_users_name_it_had(sqlite_changji: Changji) -> None:
    app = sqlite_changji
    anna, plain = a_card_named(app, "Seraphina", user="Anna"), a_card_named(app, "Seraphina (imported)")
    named = StoryBuilder.start(app)
    app.stories.start_story(story := uuid4(), uuid4(), TENANT, anna, 0, "", {})
    app.stories.start_story(own := uuid4(), uuid4(), TENANT, anna, 0, "", {"user_name": "Bea"})
    app.cards.merge_card(TENANT, anna, plain)
    assert app.stories.move_stories(TENANT, [story, own, named.story_id], anna, plain).value == 2
    assert app.settings(app.story(TENANT, story)).user_name == "Anna"
    assert app.settings(app.story(TENANT, own)).user_name == "Bea"
    assert app.story(TENANT, own).settings == {"user_name": "Bea"}  # (its own name, as it was)
    assert app.story(TENANT, named.story_id).card_id == named.card_id  # (listed, but not the card's: stays)
