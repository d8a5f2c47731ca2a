"""The bulk reader of the notification log decodes every stored event exactly as eventsourcing's mapper
does: same class, same fields, same values and types — for every kind of event a story makes."""

from __future__ import annotations

from typing import Any

import pytest

from domain.application import Changji
from storage.notifications import SQLiteNotifications
from tests.builders import StoryBuilder, a_card
from tests.compaction_support import SMALL, compact_if_due


def test_the_bulk_reader_decodes_what_the_mapper_decodes(sqlite_changji: Changji) -> None:
    app = sqlite_changji
    odd = {"x": [1, {"y": None}], "big": 2**70, "far": float("inf"), "digits": "1234567890123456789012"}
    story = StoryBuilder.start(app, a_card(tags=["灯塔", "slow-burn"], extensions=odd), **SMALL)
    for i in range(12):
        _, reply = story.turn(f"第{i}问", f"第{i}答")
        if i == 1:
            story.annotate(reply, "star")  # an anchor: a list of ids inside the episode that covers it
        compact_if_due(app, reply)
    story.annotate(reply, "star")
    story.annotate(reply, "revise", "改过的回复", "typo")
    story.save("风暴夜")  # a save point: the application's own transcoding
    reader = SQLiteNotifications.of(app)
    assert reader is not None
    stored = app.recorder.select_notifications(start=1, limit=10_000)
    fast = reader.read(1, 10_000)
    assert [position for position, _ in fast] == [n.id for n in stored] and len(fast) > 60
    kinds: set[str] = set()
    for (position, event), notification in zip(fast, stored, strict=True):
        expected: Any = app.mapper.to_domain_event(notification)
        assert type(event) is type(expected), position
        assert vars(event) == vars(expected), (position, type(event).__name__)
        assert {k: type(v) for k, v in vars(event).items()} == {k: type(v) for k, v in vars(expected).items()}
        kinds.add(type(event).__name__)
    assert {
        "CardCreated",
        "UserSpoke",
        "EpisodeSummarized",
        "DigestFolded",
        "SavePointMarked",
        "ReplyRevised",
    } <= kinds, kinds
    assert [p for p, _ in reader.read(fast[10][0], 5, stop=fast[12][0])] == [p for p, _ in fast[10:13]]


@pytest.mark.parametrize(
    "odd",
    [
        -(2**63) - 1,  # 19 digits, past 64 bits signed: orjson would read a float
        2**64,  # 20 digits, past 64 bits unsigned
        2**64 - 1,  # the largest orjson reads exactly (the reader's way or the mapper's: the same)
        float("nan"),  # orjson refuses these: the mapper reads them
        float("-inf"),
        "NaN Infinity 1234567890123456789012",  # inside a string, nothing odd
    ],
)
def test_a_card_holding_one_odd_value_is_decoded_as_the_mapper_decodes_it(sqlite_changji: Changji, odd: Any) -> None:
    app = sqlite_changji
    StoryBuilder.start(app, a_card(extensions={"odd": odd, "list": [odd, {"inner": odd}]}), **SMALL)
    reader = SQLiteNotifications.of(app)
    assert reader is not None
    stored = app.recorder.select_notifications(start=1, limit=100)
    for (position, event), notification in zip(reader.read(1, 100), stored, strict=True):
        expected: Any = app.mapper.to_domain_event(notification)
        assert type(event) is type(expected), position
        assert repr(vars(event)) == repr(vars(expected)), position  # (repr: NaN is not equal to itself)
        if type(event).__name__ == "CardCreated":
            assert type(event.data["extensions"]["odd"]) is type(odd)


def test_no_bulk_reader_for_an_event_store_in_memory() -> None:
    assert SQLiteNotifications.of(Changji(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})) is None
