"""A reply's draft history: every version the draft went through, with the operation that made it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from domain.tree.events import GreetingPlaced, ReplyPosted, ReplyRevised
from domain.tree.rules.drafting import Edit, apply_edits
from domain.tree.turn_events import (
    AskAnswered,
    DraftAppended,
    DraftEdited,
    DraftRefused,
    DraftWritten,
    ReplySealed,
    TurnAsked,
    TurnStopped,
)


@dataclass(frozen=True, slots=True)
class DraftVersion:
    version: int
    operation: str
    text: str
    direct: bool
    at: datetime


@dataclass
class DraftHistory:
    versions: list[DraftVersion] = field(default_factory=list)
    sealed_version: int | None = None
    asks: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[dict[str, str]] = field(default_factory=list)
    stopped: dict[str, str] | None = None
    revisions: list[dict[str, Any]] = field(default_factory=list)


def project_draft(events: Iterable[Any]) -> DraftHistory:
    """Fold a node's events into its draft history (pure; the node's own events only)."""
    history, text = DraftHistory(), ""
    for e in events:
        match e:
            case GreetingPlaced() | ReplyPosted():
                text = e.text
                history.versions.append(DraftVersion(0, type(e).__name__, text, False, e.timestamp))
            case DraftWritten():
                text = e.text
                history.versions.append(DraftVersion(e.version, "draft_write", text, e.direct, e.timestamp))
            case DraftAppended():
                text = text + e.separator + e.text
                history.versions.append(DraftVersion(e.version, "draft_append", text, e.direct, e.timestamp))
            case DraftEdited():
                text = apply_edits(text, [Edit(x["old"], x["new"]) for x in e.edits])
                history.versions.append(DraftVersion(e.version, "draft_edit", text, False, e.timestamp))
            case ReplySealed():
                history.sealed_version = e.version
            case TurnAsked():
                history.asks.append({"ask_id": e.ask_id, "question": e.question, "options": e.options, "answer": None})
            case AskAnswered():
                history.asks[-1]["answer"] = e.answer
            case DraftRefused():
                history.refusals.append({"tool": e.tool, "reason": e.reason})
            case TurnStopped():
                history.stopped = {"reason": e.reason, "detail": e.detail}
            case ReplyRevised():
                text = e.text
                history.revisions.append({"text": text, "reason": e.reason, "at": e.timestamp})
    return history
