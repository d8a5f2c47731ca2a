"""The character's and the user's names as a front end sends them, for a card the proxy makes. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from domain.tree.rules.reconcile import message_text

_MAIN_PROMPT = re.compile(  # SillyTavern's default main prompt, its {{char}} and {{user}} filled in
    r"Write (?P<char>[^\n]{1,80}?)'s next reply in a fictional (?:chat|roleplay) between (?P=char) and"
    r" (?P<user>[^\n]{1,80}?)\.",
)
_PERSONALITY = re.compile(r"^(?P<char>[^\n]{1,80}?)'s personality:", re.MULTILINE)  # its personality line
_SPEAKER = re.compile(r"^(?P<char>[^\W\d_][^\n:：\d]{0,40})[:：]\s")  # "Seraphina: …", a greeting with its speaker


def front_end_names(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The character's and the user's names as a front end sends them: the messages' `name` fields where
    present; else SillyTavern's main prompt ("Write Seraphina's next reply in a fictional chat between
    Seraphina and Anna."), its personality line ("Seraphina's personality: …"), or the speaker the
    greeting opens with; "Assistant" and "User" when nothing names them."""

    def named(role: str) -> str:
        return next((str(m["name"]) for m in messages if m.get("role") == role and m.get("name")), "")

    char, user = named("assistant"), named("user")
    system = [message_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
    for text in system:
        found = _MAIN_PROMPT.search(text)
        if found:
            char, user = char or found["char"].strip(), user or found["user"].strip()
            break
    for text in system:
        found = _PERSONALITY.search(text)
        if found and not char:
            char = found["char"].strip()
    greeting = next((message_text(m.get("content")) for m in messages if m.get("role") in ("assistant", "user")), "")
    spoken = _SPEAKER.match(greeting) if messages and not char else None
    if spoken and any(m.get("role") == "assistant" and message_text(m.get("content")) == greeting for m in messages):
        char = spoken["char"].strip()
    return char or "Assistant", user or "User"
