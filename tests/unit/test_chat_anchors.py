"""Where a proxied chat lies in the tree: each message's link with the one before it, and the runs of a
chat's messages found one after another on a path (`domain/tree/rules/reconcile.py`)."""

from __future__ import annotations

from domain.tree.rules.reconcile import ChatMessage, Found, anchors, link, links, said


def chat(*texts: str) -> list[ChatMessage]:
    return [ChatMessage("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]


def test_a_link_is_the_same_whatever_the_whitespace_and_differs_with_the_message_before() -> None:
    assert links(chat("hello  there", "a\nreply"), True) == links(chat("hello there", " a reply "), True)
    assert link(said("user", "a"), said("assistant", "b")) != link(said("user", "c"), said("assistant", "b"))


def test_a_chat_with_no_greeting_links_its_first_message_with_an_empty_one() -> None:
    first = links(chat("hi"), False)[0]
    assert first == link(said("assistant", ""), said("user", "hi"))
    assert first != links(chat("hi"), True)[0]  # opening a story: linked with nothing


def rows(*placed: tuple[str, str | None, int]) -> list[Found]:
    return [Found(node, parent, "s", at) for node, parent, at in placed]


def test_the_run_from_the_chats_start_comes_first_and_goes_furthest() -> None:
    # chat messages 1..3 on the path n1 → n2 → n3; message 5 found elsewhere alone
    found = rows(("n1", "n0", 1), ("n2", "n1", 2), ("n3", "n2", 3), ("x5", "x4", 5))
    first = anchors(found)[0]
    assert (first.node_id, first.start, first.at) == ("n3", 0, 3)
    assert [a.node_id for a in anchors(found)] == ["n3", "x5"]


def test_an_edit_breaks_the_run_and_the_longest_later_run_places_the_chat() -> None:
    # message 1 edited: its link and the next one's are not found; 3..5 lie one after another
    found = rows(("n3", "n2", 3), ("n4", "n3", 4), ("n5", "n4", 5))
    (only,) = anchors(found)
    assert (only.node_id, only.start, only.at) == ("n5", 2, 5)


def test_a_row_whose_parent_is_not_the_run_below_starts_a_run_of_its_own() -> None:
    # a delete in the middle: message 3's node hangs under another node than message 2's
    found = rows(("n1", "n0", 1), ("n2", "n1", 2), ("m3", "other", 3), ("m4", "m3", 4))
    ends = {(a.node_id, a.start, a.at) for a in anchors(found)}
    assert ends == {("n2", 0, 2), ("m4", 2, 4)}
    assert anchors(found)[0].node_id == "n2"  # from the chat's start first
