"""The system prompt built from the card, and the `{{char}}` / `{{user}}` macros of every text."""

from __future__ import annotations

import re

from domain.values import CardData

_MACROS = re.compile(r"\{\{(char|user)\}\}|<(BOT|USER)>", re.IGNORECASE)


def fill_macros(text: str, char: str, user: str) -> str:
    return _MACROS.sub(lambda m: char if (m.group(1) or m.group(2)).lower() in ("char", "bot") else user, text)


def build_system_prompt(card: CardData, user_name: str) -> str:
    """Byte-stable for a given card revision and user name (providers can cache the prefix)."""
    sections = [
        f"# 卡作者附加指令（优先级最高）\n{card.system_prompt}" if card.system_prompt else "",
        f"# 你扮演的角色：{card.name}\n{card.description}".rstrip(),
        f"## 性格\n{card.personality}" if card.personality else "",
        f"## 当前场景\n{card.scenario}" if card.scenario else "",
        f"## 对白示例（仅示范口吻，不是已发生的剧情）\n{card.mes_example}" if card.mes_example else "",
        f"# 用户扮演：{user_name}",
    ]
    return fill_macros("\n\n".join(s for s in sections if s), card.name, user_name)
