"""Every fixed text changji writes into a prompt exists in Chinese and English, and the language follows the
card: detected from its text, or set on the card or the story."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from domain.language import detect_language
from domain.texts import CONTEXT_TEXTS, EN, ZH
from domain.tree.draft_tools import TOOL_TEXTS
from domain.tree.rules.extractive import Line, fold_digest, summarize_episode
from domain.values import DIGEST_SECTIONS, CardData, StorySettings
from engine.tool_schemas import ENGINE_RULES
from schedulers.workers.scribe import PROMPTS as SCRIBE_PROMPTS
from schedulers.workers.summary_prompts import SUMMARY_PROMPTS, digest_markdown, digest_system, parse_sections

HAN = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")  # Han, CJK punctuation, full-width forms


def texts_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts_of(v)]
    return [t for f in fields(value) for t in texts_of(getattr(value, f.name))]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("{{char}} is the keeper of the northern lighthouse.", "en"),
        ("{{char}}是北屿灯塔的守塔人，沉默寡言。", "zh"),
        ("沈砚 (Shen Yan) is a lighthouse keeper: 他守着灯塔十年了。", "zh"),
        ("A knight from Eldoria who speaks softly and carries an old sword named 影 (Shadow).", "en"),
        ("", "en"),
        ("<p>{{user}}</p> 12345", "en"),
    ],
)
def test_the_language_is_detected_from_the_share_of_han_words(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_a_card_or_story_setting_overrides_what_the_text_says() -> None:
    card = CardData(name="Mira", description="A ferry pilot.")
    assert card.language() == "en" and card.language("zh") == "zh"
    assert card.language(StorySettings().merged({"language": "zh"}).language) == "zh"


def test_the_english_texts_carry_no_chinese_and_the_chinese_texts_are_chinese() -> None:
    english = [
        *texts_of(EN), *texts_of(TOOL_TEXTS["en"]), ENGINE_RULES["en"], *texts_of(SUMMARY_PROMPTS["en"]),
        *texts_of(SCRIBE_PROMPTS["en"]), digest_system("en", "Alex", 3000),
    ]  # fmt: skip
    assert not [t for t in english if HAN.search(t)]
    assert set(TOOL_TEXTS["zh"]) == set(TOOL_TEXTS["en"]) and set(SCRIBE_PROMPTS["zh"]) == set(SCRIBE_PROMPTS["en"])
    worded = [f.name for f in fields(ZH) if re.search(r"[A-Za-z\u4e00-\u9fff]", str(getattr(ZH, f.name)))]
    assert worded and all(HAN.search(str(getattr(ZH, name))) for name in worded if name != "language")
    assert set(CONTEXT_TEXTS) == set(ENGINE_RULES) == set(SUMMARY_PROMPTS) == set(SCRIBE_PROMPTS) == {"zh", "en"}


def test_an_english_digest_is_read_back_under_the_canonical_section_names() -> None:
    answer = digest_markdown({name: f"text of {name}" for name in DIGEST_SECTIONS}, "en")
    assert "## Story so far" in answer and "## Current scene" in answer
    assert parse_sections(answer, None) == {name: f"text of {name}" for name in DIGEST_SECTIONS}
    chinese = digest_markdown({"当前场景": "灯塔"}, "zh")
    assert parse_sections(chinese, {"人物": "沈砚"}) == {
        **dict.fromkeys(DIGEST_SECTIONS, ""),
        "人物": "沈砚",
        "当前场景": "灯塔",
    }


def test_the_offline_summaries_of_an_english_story_carry_no_chinese_labels() -> None:
    lines = [
        Line("Alex", "I promise to come back tomorrow with the lamp oil.", 1),
        Line("Mira", "Then I will wait.", 1),
    ]
    episode = summarize_episode(lines, ["Mira"], 600, "en")
    assert episode.startswith("Alex: I promise") and not HAN.search(episode)
    digest = fold_digest(None, [(1, 3, episode)], lines, ["Mira"], "", 3000, "en")
    assert set(digest) == set(DIGEST_SECTIONS) and not any(HAN.search(text) for text in digest.values())
    assert digest["前情提要"].startswith("Turns 1–3: ")


@pytest.mark.parametrize(
    ("words", "asked"),
    [
        ("请把这个记下来。", True),
        ("把老周记下，他以后还会出现。", True),
        ("Please note this down.", True),
        ("Add her to the lorebook.", True),
        ("Remember that night at the pier?", False),
        ("我记住你了。", False),
        ("把通话记录删掉。", False),
        ("写入失败了吗？", False),
    ],
)
def test_the_write_gate_opens_only_for_words_that_ask_to_record(words: str, asked: bool) -> None:
    from domain.card.commands.lore import asks_to_record

    assert asks_to_record(words) is asked
