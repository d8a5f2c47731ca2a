"""The `{{char}}` / `{{user}}` macros (and the legacy `<BOT>` / `<USER>`), any case, filled with the names."""

from __future__ import annotations

import re

_MACROS = re.compile(r"\{\{(char|user)\}\}|<(BOT|USER)>", re.IGNORECASE)


def fill_macros(text: str, char: str, user: str) -> str:
    return _MACROS.sub(lambda m: char if (m.group(1) or m.group(2)).lower() in ("char", "bot") else user, text)
