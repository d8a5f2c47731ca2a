"""A chat is found wherever a front end cut it: each message's link with the one before it is the key the
tree's nodes carry, and the runs of a chat's messages found one after another are ranked, those that hold
the chat from its first message first (`domain/tree/rules/reconcile.py`: `links`, `anchors`)."""

from __future__ import annotations

import random

import pytest

from domain.tree.rules.reconcile import Anchor, ChatMessage, Found, anchors, link, links, said

GREETING = ChatMessage("assistant", "The ferry horn sounds.")
STORY = [GREETING] + [ChatMessage("user" if i % 2 else "assistant", f"message {i}") for i in range(1, 9)]


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 8])
def test_a_cut_chat_links_its_messages_as_the_story_does_but_its_first_with_an_empty_greeting(cut: int) -> None:
    """The story's links are its nodes' (`projections/read_models/rows.py`); a chat cut before message `cut`
    has the same keys after its first, whose key is its link with an empty greeting."""
    stored, sent = links(STORY, opens=True), links(STORY[cut:], opens=False)
    assert sent[1:] == stored[cut + 1 :]
    assert sent[0] == link(said("assistant", ""), said(STORY[cut].role, STORY[cut].text)) != stored[cut]


def test_a_chat_without_a_greeting_links_as_a_story_whose_greeting_is_empty() -> None:
    chat = STORY[1:5]
    assert links(chat, opens=False) == links([ChatMessage("assistant", ""), *chat], opens=True)[1:]


def test_a_story_opens_with_its_greeting_linked_with_nothing() -> None:
    assert links(STORY, opens=True)[0] == link(None, said("assistant", GREETING.text))


@pytest.mark.parametrize(
    ("sent", "kept", "same"),
    [
        ("a  ferry\n\nat dusk", "a ferry at dusk", True),
        ("  a ferry at dusk\t", "a ferry at dusk", True),
        ("a ferry\r\nat dusk", "a ferry at dusk", True),
        ("a ferry at dusk.", "a ferry at dusk", False),
        ("a ferryat dusk", "a ferry at dusk", False),
    ],
)
def test_whitespace_does_not_change_a_link_and_words_do(sent: str, kept: str, same: bool) -> None:
    before = ChatMessage("user", "When does it leave?")
    shown, stored = ChatMessage("assistant", sent), ChatMessage("assistant", kept)
    assert (links([before, shown], False) == links([before, stored], False)) is same


def test_the_same_words_said_by_the_other_role_are_another_message() -> None:
    assert said("user", "Hello.") != said("assistant", "Hello.")
    assert links([ChatMessage("user", "Hello.")], False) != links([ChatMessage("assistant", "Hello.")], False)


# --- anchors ----------------------------------------------------------------------------------------------


def placed(story: str, *rows: tuple[str, str | None, int]) -> list[Found]:
    """Rows of `story`'s tree: (node, its parent, the chat's message its link matched)."""
    return [Found(node, parent, story, at) for node, parent, at in rows]


def ends(found: list[Found]) -> list[tuple[str, int, int]]:
    return [(a.node_id, a.start, a.at) for a in anchors(found)]


def test_runs_from_the_chats_start_come_first_the_furthest_first_then_the_longest_other() -> None:
    found = [
        *placed("short", ("a1", "a0", 1), ("a2", "a1", 2), ("a3", "a2", 3)),
        *placed("far", ("b1", "b0", 1), ("b2", "b1", 2), ("b3", "b2", 3), ("b4", "b3", 4), ("b5", "b4", 5)),
        *placed("late", ("c6", "c5", 6), ("c7", "c6", 7), ("c8", "c7", 8), ("c9", "c8", 9)),  # longer than "short"
    ]
    assert ends(found) == [("b5", 0, 5), ("a3", 0, 3), ("c9", 5, 9)]
    assert [a.story_id for a in anchors(found)] == ["far", "short", "late"]


def test_runs_that_do_not_hold_the_chats_start_are_ranked_longest_first_then_furthest() -> None:
    found = placed(
        "s",
        ("a4", "a3", 4), ("a5", "a4", 5),  # messages 3–5
        ("b7", "b6", 7), ("b8", "b7", 8), ("b9", "b8", 9),  # 6–9
        ("c11", "c10", 11), ("c12", "c11", 12),  # 10–12: as long as 3–5, further
    )  # fmt: skip
    assert ends(found) == [("b9", 6, 9), ("c12", 10, 12), ("a5", 3, 5)]


def test_a_chat_that_opens_with_the_greeting_runs_from_its_root() -> None:
    found = placed("s", ("g", None, 0), ("n1", "g", 1), ("n2", "n1", 2))
    assert anchors(found) == [Anchor("n2", "s", 2, 0)]


def test_an_edit_breaks_the_run_where_the_edited_message_is() -> None:
    # message 3 edited: its link and the next one's find nothing; 5 and 6 go on under the old 4
    found = placed("s", ("n0", None, 0), ("n1", "n0", 1), ("n2", "n1", 2), ("n5", "n4", 5), ("n6", "n5", 6))
    assert ends(found) == [("n2", 0, 2), ("n6", 4, 6)]


def test_a_message_deleted_in_the_middle_breaks_the_run_there() -> None:
    # the chat lost the story's message 3: its message 3 is the story's 4, which follows no node of 2
    found = placed("s", ("n1", "n0", 1), ("n2", "n1", 2), ("n5", "n4", 4), ("n6", "n5", 5))
    assert ends(found) == [("n2", 0, 2), ("n6", 3, 5)]


def test_a_row_goes_on_only_from_its_own_parent() -> None:
    # a message 2 found under another node than message 1's: two runs, not one
    found = placed("s", ("n1", "n0", 1), ("m2", "elsewhere", 2), ("m3", "m2", 3))
    assert ends(found) == [("n1", 0, 1), ("m3", 1, 3)]


def test_siblings_that_say_the_same_are_two_runs() -> None:
    found = placed("s", ("n1", "n0", 1), ("r2", "n1", 2), ("r2 again", "n1", 2))
    assert sorted(ends(found)) == [("r2", 0, 2), ("r2 again", 0, 2)]


def test_the_runs_do_not_depend_on_the_order_the_rows_came_in() -> None:
    found = [
        *placed("s", ("n1", "n0", 1), ("n2", "n1", 2), ("n3", "n2", 3), ("n5", "n4", 5), ("n6", "n5", 6)),
        *placed("t", ("t2", "t1", 2), ("t3", "t2", 3)),
    ]
    shuffled = found[:]
    random.Random(7).shuffle(shuffled)
    assert anchors(shuffled) == anchors(found) == anchors(found[::-1])


def test_no_rows_no_runs() -> None:
    assert anchors([]) == []
