"""What reading a SillyTavern chat file gives: a `ChatImportPlan` (the header, the greeting and its alternatives,
one `ChatStep` per node of the path to build, warnings, skipped lines), the `ChatLimits` it is read within and the
`ChatFormatError` of a file that cannot be read.

Every step's `alternatives` are its other swipes in swipe order, and `chosen_index` is the chosen text's place
among `alternatives[:chosen_index] + (chosen,) + alternatives[chosen_index:]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Role = Literal["user", "reply"]


class ChatFormatError(ValueError):
    """The bytes are not a SillyTavern chat this reader accepts; `field` names where ("line 3.mes", "file")."""

    def __init__(self, reason: str, field: str = "file") -> None:
        super().__init__(f"{field}: {reason}")
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class ChatLimits:
    max_bytes: int = 256 * 2**20
    max_messages: int = 200_000
    max_swipes: int = 1_000  # of one message (what an import makes is bounded by max_nodes)
    max_text: int = 100_000  # what the API takes for one node
    max_nodes: int = 100_000  # messages and their other swipes: the nodes one import makes, in one transaction
    max_skipped: int = 10_000  # lines that are not JSON objects, past which the file is not taken for a chat


@dataclass(frozen=True, slots=True)
class ChatTurnText:
    text: str
    sent_at: datetime | None
    extra: dict[str, Any]
    generated: tuple[str | None, str | None] = (None, None)  # gen_started, gen_finished as the file wrote them


@dataclass(frozen=True, slots=True)
class ChatStep:
    role: Role
    chosen: ChatTurnText
    alternatives: tuple[ChatTurnText, ...]
    chosen_index: int
    hidden: bool
    name: str
    joined: int
    source_lines: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChatImportPlan:
    header: dict[str, Any]
    user_name: str
    character_name: str
    greetings: tuple[ChatTurnText, ...]
    greeting_index: int
    steps: tuple[ChatStep, ...]
    warnings: tuple[str, ...]
    skipped_lines: tuple[int, ...]
