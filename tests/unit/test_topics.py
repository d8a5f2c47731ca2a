"""Events are forever: every topic a store may hold resolves to its class, wherever the class lives now."""

from __future__ import annotations

from pathlib import Path

from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic, resolve_topic

import domain.topics  # noqa: F401  (registers the topics of classes that moved)
from domain.application import stored_class
from domain.card.card import Card
from domain.card.lorebook import Lorebook
from domain.folded import Folded
from domain.memory.card_memory import CardMemory
from domain.topics import EVENT_MODULES
from domain.tree.node import Node
from domain.tree.story import Story

STORED = Path(__file__).parents[1] / "fixtures" / "stored_topics.txt"
AGGREGATES = (Card, Lorebook, Story, Node, CardMemory)


def stored_topics() -> list[str]:
    return [line for line in STORED.read_text().splitlines() if line and not line.startswith("#")]


def every_event_class() -> list[type]:
    return [
        value
        for module in EVENT_MODULES
        for value in vars(module).values()
        if isinstance(value, type) and value.__module__ == module.__name__
    ]


def test_every_topic_a_store_may_hold_resolves_to_an_event_or_aggregate_class() -> None:
    for topic in stored_topics():
        cls = resolve_topic(topic)
        assert isinstance(cls, type) and (issubclass(cls, Folded) or issubclass(cls, Aggregate)), topic


def test_an_old_topic_and_the_current_one_name_the_same_class() -> None:
    topics = stored_topics()
    old = [t for t in topics if t.startswith("domain.events:")]
    assert len(old) >= 58
    for topic in old:
        cls = resolve_topic(topic)
        assert get_topic(cls) in topics and cls.__name__ == topic.split(":")[1]


def test_every_event_and_aggregate_is_listed_under_the_topic_it_is_saved_under_now() -> None:
    """A new event, or one moved, must be listed (and a moved one keep its old topic registered):
    otherwise the stores written now could not be read by a later move."""
    listed = set(stored_topics())
    classes = [*every_event_class(), *AGGREGATES]
    assert len(classes) > 60
    missing = sorted(get_topic(cls) for cls in classes if get_topic(cls) not in listed)
    assert not missing, f"add to {STORED.name}: {missing}"


def test_every_event_module_holds_only_events() -> None:
    for cls in every_event_class():
        assert issubclass(cls, Folded), cls


def test_a_topic_this_version_does_not_know_names_no_class() -> None:
    """(An event a newer version wrote: following the log passes it by instead of failing on it.)"""
    assert stored_class("domain.memory.events:SomethingNewer") is None
    assert stored_class("domain.nowhere:Thing") is None
    assert stored_class("domain.events:UserSpoke") is resolve_topic("domain.tree.events:UserSpoke")
