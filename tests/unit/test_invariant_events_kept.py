"""Invariant 4: hide, unhide and revise are new events; stored events are never rewritten."""

from __future__ import annotations

from domain.application import Changji
from tests.builders import StoryBuilder


def log_of(app: Changji) -> list[tuple[int, str, bytes]]:
    notifications = app.recorder.select_notifications(start=1, limit=10_000)
    return [(n.id, n.topic, n.state) for n in notifications]


def test_annotations_append_events_and_keep_earlier_ones_byte_identical(story: StoryBuilder) -> None:
    (_, r1), _ = story.turns(2)
    before = log_of(story.app)
    story.annotate(r1, "hide")
    story.annotate(r1, "unhide")
    story.annotate(r1, "revise", "改写后的回答。", "typo")
    after = log_of(story.app)
    assert after[: len(before)] == before
    assert [t.rsplit(":", 1)[1] for _, t, _ in after[len(before) :]] == ["NodeHidden", "NodeUnhidden", "ReplyRevised"]


def test_revise_keeps_the_original_text_in_the_nodes_history(story: StoryBuilder) -> None:
    _, reply = story.turn("问。", "原来的回答。")
    story.annotate(reply, "revise", "改写后的回答。", "typo")
    events = story.app.events_of(reply)
    assert [type(e).__name__ for e in events] == ["ReplyPosted", "ReplyRevised"]
    assert (events[0].text, story.app.node(reply).text) == ("原来的回答。", "改写后的回答。")  # type: ignore[attr-defined]


def test_repeated_annotation_appends_nothing_when_state_is_unchanged(story: StoryBuilder) -> None:
    _, reply = story.turn()
    story.annotate(reply, "hide")
    count = len(story.app.events_of(reply))
    story.annotate(reply, "hide")
    assert len(story.app.events_of(reply)) == count
