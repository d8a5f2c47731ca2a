"""The resident summary's room in a context: it rides after the story's own summary in the 【前情提要】
message, and shares one budget with that summary and the scene (snapshot and roster): what the story
itself knows always comes first, what earlier stories left comes after, in what is left."""

from __future__ import annotations

from dataclasses import dataclass

from domain.language import Language

SHARED_CHARS = 4300  # the story's summary, the scene and the resident summary together
RESIDENT_CHARS = 1200  # the resident summary at most
FLOOR_CHARS = 200  # less room than this: the resident summary is left out, not cut to a stub
CUT_MARK: dict[Language, str] = {"zh": "\n（……余下内容因篇幅略）", "en": "\n(… the rest is left out for length)"}


@dataclass(frozen=True, slots=True)
class Fitted:
    """What of the resident summary goes into the context (None: none of it), its room, and whether it
    was cut."""

    text: str | None
    room: int
    cut: bool


def fit_resident(text: str, other_chars: int, language: Language) -> Fitted:
    """The resident summary fitted beside `other_chars` of the story's own summary and scene: whole when
    it fits its room (RESIDENT_CHARS at most, and what SHARED_CHARS leaves); left out when that room is
    under FLOOR_CHARS; else cut at its last blank line inside the room (or its last line break, or
    anywhere, when those fall under FLOOR_CHARS) with a mark saying so."""
    text = text.strip()
    room = min(RESIDENT_CHARS, SHARED_CHARS - other_chars)
    if not text:
        return Fitted(None, max(room, 0), False)
    if len(text) <= room:
        return Fitted(text, room, False)
    if room < FLOOR_CHARS:
        return Fitted(None, max(room, 0), True)
    mark = CUT_MARK[language]
    head = text[: room - len(mark)]
    for boundary in ("\n\n", "\n"):
        at = head.rfind(boundary)
        if at >= FLOOR_CHARS:
            head = head[:at]
            break
    return Fitted(head.rstrip() + mark, room, True)
