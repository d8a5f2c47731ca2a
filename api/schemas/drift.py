"""The drift on a story's path: its signals at a reply and what they mean for the next turn."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field


class DriftSignalModel(BaseModel):
    name: Literal["creep", "banned", "repeat", "language", "echo"]
    value: float = Field(description="what was measured (a ratio, a share, a count)")
    threshold: float = Field(description="the story setting it is held against (0: the signal is off)")
    fired: bool
    detail: str = Field(description="what it saw, in words")
    evidence: str = Field(description="the phrase repeated, the banned words found, the early length…")
    replies: list[UUID] = Field(description="the replies behind the value, oldest first")


class DriftResponse(BaseModel):
    story_id: UUID
    at: UUID = Field(description="the node asked about (default: the leaf)")
    reply_id: UUID | None = Field(description="the reply judged: the newest visible one at or above `at`")
    turn: int | None = Field(description="that reply's turn")
    signals: list[DriftSignalModel]
    fired: int = Field(description="signals fired at the reply; two or more force a re-anchoring")
    run: int = Field(description="replies in a row, ending at this one, with two or more signals")
    forced: bool = Field(description="the turn after the reply carries a forced re-anchoring block")
    reanchor_turns: int = Field(description="the periodic re-anchoring's period (0: off)")
    next_periodic_turn: int | None = Field(description="the next turn (from `at`'s) the periodic block comes at")
    anchor: str = Field(
        description="the identity anchor: the digest opens with it; a re-anchoring block carries it, a derived one"
        " without the card's post-history instructions, which come just before the block"
    )
    anchor_derived: bool = Field(description="derived from the card (no `identity_anchor` written)")
    language: Literal["zh", "en"] = Field(description="the language the replies are held to")
