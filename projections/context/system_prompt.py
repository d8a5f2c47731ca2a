"""The system prompt built from the card (the macros of every text: `domain/macros.py`)."""

from __future__ import annotations

from domain.macros import fill_macros
from domain.texts import ContextTexts
from domain.values import CardData

__all__ = ["build_system_prompt", "fill_macros"]


def build_system_prompt(
    card: CardData, user_name: str, texts: ContextTexts, lore_before: str = "", lore_after: str = ""
) -> str:
    """Byte-stable for a given card revision, user name, language and constant lore (providers can cache
    the prefix). Constant lore entries go before or after the character, as each entry's position says."""
    sections = [
        f"{texts.card_instructions}\n{card.system_prompt}" if card.system_prompt else "",
        f"{texts.lore_constant}\n{lore_before}" if lore_before else "",
        f"{texts.playing.format(name=card.name)}\n{card.description}".rstrip(),
        f"{texts.personality}\n{card.personality}" if card.personality else "",
        f"{texts.scenario}\n{card.scenario}" if card.scenario else "",
        f"{texts.lore_constant}\n{lore_after}" if lore_after else "",
        f"{texts.examples}\n{card.mes_example}" if card.mes_example else "",
        texts.user_plays.format(user=user_name),
    ]
    return fill_macros("\n\n".join(s for s in sections if s), card.name, user_name)
