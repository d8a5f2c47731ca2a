"""The bulk reader of the notification log decodes every stored event exactly as eventsourcing's mapper
does: same class, same fields, same values and types — for every kind of event a story makes."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

from domain.application import Changji
from storage.notifications import SQLiteNotifications, StoredEvents
from tests.builders import StoryBuilder, a_card
from tests.compaction_support import SMALL, compact_if_due


@pytest.mark.both_stores
def test_the_bulk_reader_decodes_what_the_mapper_decodes(stored_app: Changji, bulk_reader: StoredEvents) -> None:
    app = stored_app
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
    reader = bulk_reader
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
    mapped = [app.mapper.to_domain_event(e) for e in app.recorder.select_events(story.story_id)]
    assert [vars(e) for e in reader.events_of([story.story_id])] == [vars(e) for e in mapped] and mapped


@pytest.mark.parametrize(
    "odd",
    [
        -(2**63) - 1,  # 19 digits, past 64 bits signed: orjson would read a float
        2**64,  # 20 digits, past 64 bits unsigned
        10**18 + 1,  # 19 digits but one: orjson reads it exactly (the reader's own way)
        -(10**18) - 1,
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


class CountingMapper:
    """The application's mapper, counting the events it is asked to decode."""

    def __init__(self, mapper: Any) -> None:
        self.mapper, self.decoded = mapper, 0
        self.transcoder, self.compressor, self.cipher = mapper.transcoder, mapper.compressor, mapper.cipher

    def to_domain_event(self, stored: Any) -> Any:
        self.decoded += 1
        return self.mapper.to_domain_event(stored)


def test_ordinary_events_are_decoded_by_the_reader_itself_and_odd_ones_by_the_mapper(sqlite_changji: Changji) -> None:
    story = StoryBuilder.start(sqlite_changji, a_card(extensions={"long": 10**20}), **SMALL)  # one odd event
    story.turns(3, "第{i}问：NaN、Infinity 与 123456789012345678", "第{i}答")  # in a text: ordinary
    story.turn("一串很长的数字 1234567890123456789012", "嗯。")  # 19 digits or more anywhere: the mapper's way
    reader = SQLiteNotifications.of(sqlite_changji)
    assert reader is not None
    counting = CountingMapper(sqlite_changji.mapper)
    events = SQLiteNotifications(reader.path, counting, reader.table).read(1, 1000)
    with sqlite3.connect(reader.path) as db:  # states with 19 digits in a row: the card's, the long number's,
        states = [row[0] for row in db.execute(f"select state from {reader.table}")]  # and any whose random
    odd = sum(re.search(rb"[0-9]{19}", state) is not None for state in states)  # ids happen to hold such a run
    assert len(events) > 12 and odd >= 2 and counting.decoded == odd
    assert type(events[0][1]).__name__ == "CardCreated" and events[0][1].data["extensions"]["long"] == 10**20


def test_no_bulk_reader_for_an_event_store_in_memory() -> None:
    assert SQLiteNotifications.of(Changji(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})) is None
