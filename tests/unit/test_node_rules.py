"""Node attach rules: turns alternate user/reply under a greeting, and every node carries text."""

from __future__ import annotations

from uuid import uuid4

import pytest

from domain.errors import EmptyTextError, InvalidParentError, NodeKindError
from domain.tree.node import Node
from tests.builders import StoryBuilder


def a_chain() -> dict[str, Node]:
    greeting = Node.place_greeting(uuid4(), uuid4(), "门被风撞开。", 0)
    user = Node.attach(uuid4(), "user", greeting, "你好。")
    reply = Node.attach(uuid4(), "reply", user, "嗯。")
    return {"greeting": greeting, "user": user, "reply": reply}


@pytest.mark.parametrize(("kind", "parent_kind"), [("user", "greeting"), ("user", "reply"), ("reply", "user")])
def test_attach_accepts_node_when_turns_alternate(kind: str, parent_kind: str) -> None:
    parent = a_chain()[parent_kind]
    node = Node.attach(uuid4(), kind, parent, "一句话。")  # type: ignore[arg-type]
    assert (node.kind, node.parent_id, node.story_id) == (kind, parent.id, parent.story_id)


@pytest.mark.parametrize(("kind", "parent_kind"), [("reply", "reply"), ("user", "user"), ("reply", "greeting")])
def test_attach_refuses_node_when_turns_do_not_alternate(kind: str, parent_kind: str) -> None:
    with pytest.raises(InvalidParentError):
        Node.attach(uuid4(), kind, a_chain()[parent_kind], "一句话。")  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_attach_refuses_node_when_text_is_empty(text: str) -> None:
    with pytest.raises(EmptyTextError):
        Node.attach(uuid4(), "user", a_chain()["greeting"], text)


def test_revise_refuses_user_node() -> None:
    with pytest.raises(NodeKindError):
        a_chain()["user"].revise("改写", "")


def test_append_numbers_depth_and_turn_along_the_path(story: StoryBuilder) -> None:
    (u1, r1), (u2, r2) = story.turns(2)
    views = [story.app.node(n) for n in (story.root_id, u1, r1, u2, r2)]
    assert [(v.depth, v.turn) for v in views] == [(0, 0), (1, 1), (2, 1), (3, 2), (4, 2)]


def test_regenerated_reply_has_its_siblings_depth_and_turn(story: StoryBuilder) -> None:
    user, first = story.turn()
    second = story.reply("另一个回答。", parent=user)
    a, b = story.app.node(first), story.app.node(second)
    assert (b.parent_id, b.depth, b.turn) == (a.parent_id, a.depth, a.turn)
    assert story.leaf == second


def test_append_refuses_reply_under_reply_at_the_leaf(story: StoryBuilder) -> None:
    story.turn()
    with pytest.raises(InvalidParentError):
        story.reply("又一个回答。")
