"""A character card, as SillyTavern reads its fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Card:
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""

    @classmethod
    def from_json(cls, card: Mapping[str, Any]) -> Card:
        """A chara_card_v2/v3 JSON (or its `data`), or a V1 card."""
        data = card.get("data") if isinstance(card.get("data"), Mapping) else card
        assert isinstance(data, Mapping)

        def text(key: str) -> str:
            value = data.get(key)
            return value if isinstance(value, str) else ""

        return cls(
            name=text("name"),
            description=text("description"),
            personality=text("personality"),
            scenario=text("scenario"),
            first_mes=text("first_mes"),
            mes_example=text("mes_example"),
            system_prompt=text("system_prompt"),
            post_history_instructions=text("post_history_instructions"),
        )
