"""Stored events as plain data, for the answers that list them (a replay's steps, a card memory's history)."""

from __future__ import annotations

from typing import Any


def event_record(event: Any) -> dict[str, Any]:
    """A stored event as plain data: its type, position in its aggregate, and its own fields."""
    skip = {"originator_id", "originator_version", "timestamp", "originator_topic"}
    return {
        "type": type(event).__name__, "originator_id": event.originator_id, "version": event.originator_version,
        "timestamp": event.timestamp, "data": {k: v for k, v in vars(event).items() if k not in skip},
    }  # fmt: skip
