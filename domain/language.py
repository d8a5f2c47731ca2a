"""The language changji writes its own prompt texts in: Chinese or English, chosen per card from the card's
text (or set on the card or the story), so an English card's context carries no Chinese framing and a
Chinese card's none in English."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

Language = Literal["zh", "en"]
LanguageChoice = Literal["auto", "zh", "en"]

DETECT_CHARS = 4000  # of each field read: a card's language shows in its first paragraphs
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]+")


def detect_language(*texts: str) -> Language:
    """Chinese when Han characters are at least a fifth of the words (a Han character counts as a word,
    a run of Latin letters as one), else English; English when there is nothing to go by. `{{char}}`-style
    macros and markup are left out. (Japanese, with kana, is taken for Chinese: changji has no Japanese
    texts yet; set the card's `language` to choose.)"""
    return _detected("\n".join(text[:DETECT_CHARS] for text in texts))


@lru_cache(maxsize=512)
def _detected(sample: str) -> Language:
    sample = re.sub(r"\{\{[^}]*\}\}|<[^>]*>", " ", sample)
    han = len(_HAN.findall(sample))
    words = han + len(_LATIN.findall(sample))
    return "zh" if words and han * 5 >= words else "en"


def resolve_language(choice: LanguageChoice, *card_texts: str) -> Language:
    return detect_language(*card_texts) if choice == "auto" else choice
