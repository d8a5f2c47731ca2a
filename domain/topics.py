"""Every topic an event or aggregate was ever stored under keeps resolving, wherever its class lives now.

A stored event names its class by topic (`module:Class`), and an aggregate's first event and its
snapshots name the aggregate's class the same way; events are never rewritten, so a class that moves
registers here every topic it was stored under. Until the domain was laid out by aggregate, every event
lived in `domain.events` and each aggregate in a module of its own name. `tests/unit/test_topics.py`
holds the list of every topic a store may hold and checks that each still resolves.
"""

from __future__ import annotations

from eventsourcing.utils import register_topic

from domain.card import events as card_events
from domain.card.card import Card
from domain.card.lorebook import Lorebook
from domain.memory import events as memory_events
from domain.tree import events as tree_events
from domain.tree import turn_events, work_events
from domain.tree.node import Node
from domain.tree.story import Story

MOVED_AGGREGATES = {"domain.card:Card": Card, "domain.lorebook:Lorebook": Lorebook, "domain.story:Story": Story,
                    "domain.node:Node": Node}  # fmt: skip
EVENT_MODULES = (card_events, tree_events, turn_events, work_events, memory_events)
OLD_EVENT_MODULE = "domain.events"
STORED_AS_DOMAIN_EVENTS = (  # every event that lived in `domain.events`, by name
    "CardCreated",
    "CardUpdated",
    "CardDeleted",
    "CardMerged",
    "CardImported",
    "LorebookAttached",
    "LorebookDetached",
    "LorebookCreated",
    "LoreEntryAdded",
    "LoreEntryChanged",
    "LoreEntryRemoved",
    "LoreEntryDisabled",
    "LoreEntryEnabled",
    "LoreEntryApproved",
    "LorebookDeleted",
    "StoryStarted",
    "ChatImported",
    "LeafMoved",
    "StoryMovedToCard",
    "StoryConfigured",
    "StoryRetitled",
    "SavePointMarked",
    "SavePointDeleted",
    "WorldLineRenamed",
    "StoryDeleted",
    "StoryRestored",
    "GreetingPlaced",
    "UserSpoke",
    "ReplyPosted",
    "ReplyRevised",
    "NodeStarred",
    "NodeUnstarred",
    "NodeHidden",
    "NodeUnhidden",
    "ReplyOpened",
    "ClientPartNoted",
    "DraftWritten",
    "DraftAppended",
    "DraftEdited",
    "DraftRead",
    "DraftSearched",
    "DraftRefused",
    "ReplySealed",
    "TurnAsked",
    "AskAnswered",
    "TurnStopped",
    "PreviousReplyRead",
    "MemorySearched",
    "ReplyWithdrawn",
    "ModelCalled",
    "ScenePatched",
    "SideJobFailed",
    "SideJobSkipped",
    "EpisodeSummarized",
    "DigestFolded",
    "SummaryEdited",
    "CompactionDue",
    "SideJobDone",
)


def _events() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in EVENT_MODULES:
        for name, value in vars(module).items():
            if isinstance(value, type) and value.__module__ == module.__name__:
                assert name not in found, f"two events named {name}: an old topic would name either"
                found[name] = value
    return found


def register() -> None:
    """Register the old topics (once per process; registering again is harmless)."""
    for topic, aggregate in MOVED_AGGREGATES.items():
        register_topic(topic, aggregate)
    events = _events()
    for name in STORED_AS_DOMAIN_EVENTS:
        register_topic(f"{OLD_EVENT_MODULE}:{name}", events[name])


register()
