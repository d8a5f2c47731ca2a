"""SillyTavern's macros ({{user}}, {{char}}…), and the card's fields and example dialogues they are expanded in."""

from __future__ import annotations

import re
from collections.abc import Mapping


def substitute(text: str, *, user: str, char: str, extra: Mapping[str, str] | None = None) -> str:
    """The macros a default single-character chat uses (`substituteParams`/`evaluateMacros`, public/script.js and
    public/scripts/macros.js): {{user}}, {{char}}, {{charIfNotGroup}}, <USER>, <BOT>, <CHAR>, and any extra
    {{name}} given (e.g. lastChatMessage, personality, scenario, original), all case-insensitive."""
    values = {"user": user, "char": char, "charifnotgroup": char}
    for key, value in (extra or {}).items():
        values[key.lower()] = value

    def macro(match: re.Match[str]) -> str:
        key = match.group(1).strip().lower()
        return values.get(key, match.group(0))

    text = re.sub(r"\{\{([^{}]+)\}\}", macro, text)
    text = re.sub(r"<USER>", user, text, flags=re.IGNORECASE)
    text = re.sub(r"<BOT>", char, text, flags=re.IGNORECASE)
    text = re.sub(r"<CHAR>", char, text, flags=re.IGNORECASE)
    text = re.sub(r"<CHARIFNOTGROUP>", char, text, flags=re.IGNORECASE)
    return text


# Card fields are trimmed, macro-expanded and stripped of "\r" (`getCharacterCardFields`/`baseChatReplace`,
# public/script.js).
def card_field(value: str, *, user: str, char: str) -> str:
    return substitute(value.strip(), user=user, char=char).replace("\r", "")


def example_dialogues(mes_example: str, *, user: str, char: str) -> list[list[tuple[str, str]]]:
    """Blocks of (name, content) with name example_user/example_assistant (`parseMesExamples` in script.js,
    `setOpenAIMessageExamples`/`parseExampleIntoIndividual` in openai.js)."""
    text = card_field(mes_example, user=user, char=char)
    if not text or text == "<START>":
        return []
    if not text.startswith("<START>"):
        text = "<START>\n" + text.strip()
    blocks = [f"<START>\n{block.strip()}\n" for block in re.split(r"<START>", text, flags=re.IGNORECASE)[1:]]
    return [_example_block(block, user=user, char=char) for block in blocks]


def _example_block(block: str, *, user: str, char: str) -> list[tuple[str, str]]:
    """One <START> block as (name, content) messages; its first line (the heading) is skipped."""
    lines = re.sub(r"<START>", "{Example Dialogue:}", block, count=1, flags=re.IGNORECASE).replace("\r", "")
    result: list[tuple[str, str]] = []
    current: list[str] = []
    in_user = in_bot = False

    def flush(speaker: str, system_name: str) -> None:
        joined = "\n".join(current).replace(speaker + ":", "", 1).strip()
        result.append((system_name, joined))
        current.clear()

    for line in lines.split("\n")[1:]:
        if line.startswith(user + ":"):
            in_user = True
            if in_bot:
                flush(char, "example_assistant")
            in_bot = False
        elif line.startswith(char + ":"):
            in_bot = True
            if in_user:
                flush(user, "example_user")
            in_user = False
        current.append(line)
    if in_user:
        flush(user, "example_user")
    elif in_bot:
        flush(char, "example_assistant")
    return result
