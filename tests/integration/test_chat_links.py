"""The nodes read model's `link` column on SQLite (`projections/read_models/rows.py`): each node's message
linked with its parent's, kept when a reply is revised — the revised node and its children re-linked — so
`ReadModels.linked` finds a chat as the tree now says it."""

from __future__ import annotations

import pytest

from domain.tree.rules.reconcile import Found, Role, link, said
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder

FIRST, REPLY, REVISED, SECOND = "Is the ferry late?", "It never is.", "It is, tonight.", "Then we wait."


def key(before: tuple[Role, str], message: tuple[Role, str]) -> bytes:
    """The link a node has whose message is `message` under a parent whose message is `before`."""
    return link(said(*before), said(*message))


def found(runner: ProjectionRunner, story: StoryBuilder, *keys: bytes) -> set[tuple[str, int]]:
    rows = runner.store.linked(story.tenant, list(keys), None, 100)
    return {(row.node_id, row.at) for row in rows}


@pytest.mark.parametrize("folded", ["apart", "together"], ids=["revised-after-the-fold", "revised-in-one-batch"])
def test_a_revised_reply_relinks_itself_and_its_children(
    sqlite_story: StoryBuilder, runner: ProjectionRunner, folded: str
) -> None:
    """`folded`: the revision folded in a later batch than the children (their links looked up in the read
    model), or in the batch that made them."""
    words, reply = sqlite_story.turn(FIRST, REPLY)
    later, _ = sqlite_story.turn(SECOND, "We wait.")
    if folded == "apart":
        runner.catch_up()
        assert found(runner, sqlite_story, key(("assistant", REPLY), ("user", SECOND))) == {(str(later), 0)}
    sqlite_story.annotate(reply, "revise", REVISED, "typo")
    runner.catch_up()
    old = (key(("user", FIRST), ("assistant", REPLY)), key(("assistant", REPLY), ("user", SECOND)))
    new = (key(("user", FIRST), ("assistant", REVISED)), key(("assistant", REVISED), ("user", SECOND)))
    assert found(runner, sqlite_story, *old) == set()
    assert found(runner, sqlite_story, *new) == {(str(reply), 0), (str(later), 1)}
    (revised,) = runner.store.linked(sqlite_story.tenant, [new[0]], None, 100)
    assert revised == Found(str(reply), str(words), str(sqlite_story.story_id), 0)


def test_a_link_finds_each_place_of_a_chat_it_has_and_only_the_story_named(
    sqlite_story: StoryBuilder, runner: ProjectionRunner
) -> None:
    other = StoryBuilder.start(sqlite_story.app)
    mine = sqlite_story.turn(FIRST, REPLY)
    theirs = other.turn(FIRST, REPLY)
    runner.catch_up()
    asked = key(("user", FIRST), ("assistant", REPLY))
    rows = runner.store.linked(sqlite_story.tenant, [asked, b"", asked], None, 100)
    assert sorted((r.node_id, r.at) for r in rows) == sorted(
        [(str(mine[1]), 0), (str(mine[1]), 2), (str(theirs[1]), 0), (str(theirs[1]), 2)]
    )  # each at every place of the keys it has; b"" looks nothing up
    named = runner.store.linked(sqlite_story.tenant, [asked], sqlite_story.story_id, 100)
    assert named == [Found(str(mine[1]), str(mine[0]), str(sqlite_story.story_id), 0)]
    assert runner.store.linked("another tenant", [asked], None, 100) == []


def test_the_nodes_of_a_deleted_story_are_not_found(sqlite_story: StoryBuilder, runner: ProjectionRunner) -> None:
    sqlite_story.turn(FIRST, REPLY)
    sqlite_story.app.stories.delete_story(sqlite_story.tenant, sqlite_story.story_id)
    runner.catch_up()
    assert runner.store.linked(sqlite_story.tenant, [key(("user", FIRST), ("assistant", REPLY))], None, 100) == []
