"""The checks a side model's summary passes before it is stored (`domain/tree/rules/summary_checks.py`):
an episode neither empty nor too long nor banned; a digest with its five sections, within its budget, its
当前场景 drawn from the latest turns, and no one in 人物 whom nobody met — in Chinese and English."""

from __future__ import annotations

import time

import pytest

from domain.language import Language
from domain.texts import CONTEXT_TEXTS
from domain.tree.rules.summary_checks import (
    EPISODE_LEAST,
    EPISODE_MOST,
    Failure,
    banned_found,
    check_digest,
    check_episode,
    in_english,
    scene_share,
    unknown_names,
    without_banned,
)
from domain.values import DIGEST_SECTIONS, StorySettings

COVERED = (
    "旅人：我们去灯塔吧。\n塞拉菲娜：好，趁天还没黑，我们沿着海岸走过去。\n" * 80
)  # long: the least is EPISODE_LEAST
EPISODE = "两人沿着海岸走到了灯塔，塞拉菲娜答应明天带旅人去见老渔夫，旅人把受伤的左臂藏在斗篷下面，没有让她看见。"
LEAST, ZH_MOST, EN_MOST = EPISODE_LEAST, EPISODE_MOST["zh"], EPISODE_MOST["en"]


@pytest.mark.parametrize(
    ("text", "covered", "banned", "language", "expected"),
    [
        (EPISODE * 2, COVERED, (), "zh", []),
        ("", COVERED, (), "zh", [Failure("short", (("length", 0),))]),
        ("  \n ", COVERED, (), "en", [Failure("short", (("length", 0),))]),
        ("字" * (LEAST - 1), COVERED, (), "zh", [Failure("short", (("length", LEAST - 1),))]),
        ("字" * LEAST, COVERED, (), "zh", []),
        ("", "", (), "zh", []),  # nothing covered, nothing to say
        ("字" * ZH_MOST, COVERED, (), "zh", []),
        (f"  {'字' * ZH_MOST}\n", COVERED, (), "zh", []),  # whitespace around is not counted
        ("字" * (ZH_MOST + 1), COVERED, (), "zh", [Failure("long", (("length", ZH_MOST + 1), ("most", ZH_MOST)))]),
        ("w" * EN_MOST, COVERED, (), "en", []),  # English may run longer
        ("w" * (EN_MOST + 1), COVERED, (), "en", [Failure("long", (("length", EN_MOST + 1), ("most", EN_MOST)))]),
        (
            f"As an AI, I summarized it. {EPISODE}", COVERED, ("as an ai", "unicorn"), "en",
            [Failure("banned", (("pattern", "As an AI"),))],
        ),
        (f"作为AI，{EPISODE}", COVERED, (r"作为一?个?AI",), "zh", [Failure("banned", (("pattern", "作为AI"),))]),
        (EPISODE * 2, COVERED, ("(", "unicorn"), "zh", []),  # a pattern that does not compile is skipped
        ("", COVERED, ("as an ai",), "en", [Failure("short", (("length", 0),))]),
        ("As an AI", COVERED, ("as an ai",), "en", [Failure("short", (("length", 8),)), Failure("banned", (("pattern", "As an AI"),))]),
    ],
)  # fmt: skip
def test_check_episode(
    text: str, covered: str, banned: tuple[str, ...], language: Language, expected: list[Failure]
) -> None:
    assert check_episode(text, covered, banned, language) == expected


def test_a_catastrophic_banned_pattern_is_skipped_within_the_time_limit() -> None:
    started = time.perf_counter()
    failures = check_episode("a" * 3000 + "b", COVERED, ("(a+)+$", "b$"), "en")
    assert time.perf_counter() - started < 1.0
    assert failures == [Failure("banned", (("pattern", "b"),))]


# --- digests -----------------------------------------------------------------------------------------------

LATEST = {
    "zh": "旅人：我们爬上灯塔顶层吧。\n塞拉菲娜：风雨敲打着玻璃，她点亮了油灯，回头看着你。",
    "en": "Traveler: Let's climb to the top of the lighthouse.\nSeraphina: The storm battered the windows as she"
    " lit the lantern and looked back at you.",
}
SOURCES = {
    "zh": "第一天，旅人在林间空地受伤，塞拉菲娜救下了他。老渔夫守着海边的灯塔。\n" + LATEST["zh"],
    "en": "Day one: the traveler was wounded in the glade and Seraphina saved him. Old Tom keeps the lighthouse"
    " by the sea.\n" + LATEST["en"],
}
KNOWN = {"zh": ("塞拉菲娜", "旅人"), "en": ("Seraphina", "Traveler")}
LOCATION = {"zh": "灯塔顶层", "en": "Lighthouse top"}
GOOD = {
    "zh": {
        "前情提要": "第一天，旅人在林间空地受伤，塞拉菲娜救下了他。第二天两人动身前往海边的灯塔。",
        "人物": "- 塞拉菲娜：森林的守护者，温柔而警惕\n- 性格：温柔\n- 旅人：失去记忆的剑士\n- 老渔夫：灯塔的看守",
        "承诺与伏笔": "- 塞拉菲娜答应帮旅人找回记忆",
        "事实账": "- 旅人左臂受伤；塞拉菲娜带着一盏油灯",
        "当前场景": "第三天夜里，灯塔顶层，风雨敲打着玻璃，塞拉菲娜点亮了油灯。",
    },
    "en": {
        "前情提要": "Day one: the traveler was wounded in the glade and Seraphina saved him. Day two: they set out"
        " for the lighthouse.",
        "人物": "- **Seraphina**: guardian of the forest, gentle and watchful\n- Personality: gentle\n"
        "- Old Tom: keeper of the lighthouse",
        "承诺与伏笔": "- Seraphina promised to help the traveler recover his memory",
        "事实账": "- The traveler's left arm is wounded",
        "当前场景": "Night of day three, top of the lighthouse; the storm batters the windows as Seraphina lights"
        " the lantern.",
    },
}
OLDER_SCENE = {
    "zh": "第一天傍晚，森林空地的篝火旁，两人在烤鱼聊天。",
    "en": "Beside the campfire in the forest glade, roasting fish and chatting quietly.",
}
FROM_LATEST = {  # drawn from the latest turns, without naming the ledger's place
    "zh": "风雨敲打着玻璃，塞拉菲娜点亮了油灯，回头看着旅人。",
    "en": "The storm battered the windows as Seraphina lit the lantern and looked back.",
}


def digest(language: Language, **sections: str | None) -> dict[str, str]:
    out = {**GOOD[language], **sections}
    return {name: body for name, body in out.items() if body is not None}


def check(language: Language, answered: dict[str, str], budget: int = 2000, location: str = "-") -> list[Failure]:
    place = LOCATION[language] if location == "-" else location
    return check_digest(answered, LATEST[language], SOURCES[language], KNOWN[language], (), budget, place)


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_good_digest_passes(language: Language) -> None:
    assert set(GOOD[language]) == set(DIGEST_SECTIONS)
    assert check(language, digest(language)) == []
    assert check(language, digest(language, 人物="", 承诺与伏笔="  ", 事实账="")) == []  # these may be empty


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"人物": None}, [Failure("missing", (("sections", ("人物",)),))]),
        ({"人物": None, "事实账": None}, [Failure("missing", (("sections", ("人物", "事实账")),))]),
        ({"当前场景": ""}, [Failure("empty", (("sections", ("当前场景",)),))]),
        ({"当前场景": " \n"}, [Failure("empty", (("sections", ("当前场景",)),))]),
        ({"前情提要": "", "当前场景": ""}, [Failure("empty", (("sections", ("前情提要", "当前场景")),))]),
        (
            {"前情提要": None, "当前场景": ""},
            [Failure("missing", (("sections", ("前情提要",)),)), Failure("empty", (("sections", ("当前场景",)),))],
        ),
    ],
)
def test_sections_missing_or_empty(
    language: Language, sections: dict[str, str | None], expected: list[Failure]
) -> None:
    assert check(language, digest(language, **sections)) == expected


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_digest_over_its_budget_is_too_long(language: Language) -> None:
    answered = digest(language)
    length = sum(len(body.strip()) for body in answered.values())
    assert check(language, answered, budget=-(-length * 2 // 3)) == []  # 1.5 x the budget is allowed
    budget = length // 2
    assert check(language, answered, budget=budget) == [
        Failure("long", (("length", length), ("most", int(budget * 1.5))))
    ]


def test_a_banned_pattern_in_any_section_fails() -> None:
    answered = digest("en", 事实账="- As an AI I keep the ledger")
    found = check_digest(answered, LATEST["en"], SOURCES["en"], KNOWN["en"], ("unicorn", "as an ai"), 2000)
    assert found == [Failure("banned", (("pattern", "As an AI"),))]


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize(
    ("scene", "location", "latest", "fails"),
    [
        ("good", "-", "-", False),  # names the ledger's place and the latest turns' words
        ("from latest", "-", "-", False),  # the latest turns' words, not the place's name
        ("older", "-", "-", True),  # an older place, no words from the latest turns
        ("older", "", "-", False),  # no ledger to say where the story is: not judged
        ("older", "-", "", False),  # no latest turns: not judged
        ("短", "-", "-", False),  # too few words to judge
    ],
)
def test_the_scene_follows_the_latest_turns(
    language: Language, scene: str, location: str, latest: str, fails: bool
) -> None:
    body = {"good": GOOD[language]["当前场景"], "from latest": FROM_LATEST[language], "older": OLDER_SCENE[language]}
    answered = digest(language, 当前场景=body.get(scene, scene))
    place = LOCATION[language] if location == "-" else location
    said = LATEST[language] if latest == "-" else latest
    found = check_digest(answered, said, SOURCES[language], KNOWN[language], (), 2000, place)
    assert found == ([Failure("scene", (("share", 0.0),))] if fails else [])


@pytest.mark.parametrize(
    ("scene", "latest", "names", "expected"),
    [
        ("灯塔顶层，风雨敲打着玻璃", LATEST["zh"], (), 1.0),
        ("篝火旁", LATEST["zh"], (), None),  # two pairs of characters: too few to judge
        ("塞拉菲娜和旅人", "塞拉菲娜和旅人", ("塞拉菲娜", "旅人"), None),  # only the names everyone shares
        ("lighthouse windows storm campfire", LATEST["en"], (), 0.75),
        ("the old lighthouse with its storm", "THE LIGHTHOUSE STORM", (), 2 / 3),  # words of 4+ letters, any case
    ],
)
def test_scene_share(scene: str, latest: str, names: tuple[str, ...], expected: float | None) -> None:
    assert scene_share(scene, latest, names) == expected


@pytest.mark.parametrize(
    ("people", "strangers"),
    [
        ("- 赵无极：神秘的剑客", ["赵无极"]),  # in no source and not known
        ("- 老渔夫：灯塔的看守", []),  # in the sources
        ("- 塞拉菲娜：守护者\n- 旅人：剑士", []),  # known
        ("- 性格：温柔\n- 说话习惯：轻声\n- 称呼：旅人先生", []),  # labels, not names
        ("- **赵无极**：剑客\n- 赵无极：又一次", ["赵无极"]),  # bold, and named once
        ("1. 赵无极：剑客\n2、慕容雪：侍女", ["赵无极", "慕容雪"]),
        ("- 塞拉菲娜、赵无极：同伴", ["赵无极"]),
        ("赵无极在远处看着。", []),  # not an entry
        ("- **Marcus**: a smith", ["Marcus"]),
        ("- Seraphina and Marcus: old friends", ["Marcus"]),
        ("- old tom: keeper of the lighthouse\n- SERAPHINA: guardian", []),  # any case
        ("- Personality: gentle\n- Relationship: trusting", []),
        ("- Way of speaking: soft\n- Warmth: growing\n- Direction: closer", []),  # the English guidance's words
        ("- 性格特点：温柔", []),
        ("- 赵无极：剑客\n  - 喜欢的兵器：长剑\n  * 师门：华山", ["赵无极"]),  # indented: details, not names
        ("- 和珅：权臣", ["和珅"]),  # a name with 和 in it is one name
    ],
)
def test_unknown_names(people: str, strangers: list[str]) -> None:
    sources = SOURCES["zh"] + "\n" + SOURCES["en"]
    assert unknown_names(people, [*KNOWN["zh"], *KNOWN["en"]], sources) == strangers


@pytest.mark.parametrize("language", ["zh", "en"])
def test_an_invented_name_in_the_digest_fails(language: Language) -> None:
    people = GOOD[language]["人物"] + ("\n- 赵无极：神秘的剑客" if language == "zh" else "\n- **Marcus**: a smith")
    name = "赵无极" if language == "zh" else "Marcus"
    assert check(language, digest(language, 人物=people)) == [Failure("strangers", (("names", (name,)),))]
    known = check_digest(digest(language, 人物=people), LATEST[language], SOURCES[language], [name], (), 2000)
    assert known == []  # a name the card or the roster knows


@pytest.mark.parametrize(
    ("failures", "english"),
    [
        ([], ""),
        ([Failure("short", (("length", 3),))], "too short: 3 characters"),
        ([Failure("long", (("length", 4000), ("most", 3000)))], "too long: 4000 characters, at most 3000"),
        (
            [Failure("missing", (("sections", ("人物", "事实账")),)), Failure("empty", (("sections", ("当前场景",)),))],
            "sections missing: 人物、事实账; sections empty: 当前场景",
        ),
        ([Failure("banned", (("pattern", "As an AI"),))], "a banned pattern found (As an AI)"),
        (
            [Failure("scene", (("share", 0.1),))],
            "当前场景 is not drawn from the latest turns (10% of its words are in them)",
        ),
        ([Failure("strangers", (("names", ("赵无极", "Marcus")),))], "人物 names someone in none of the turns summarized: 赵无极、Marcus"),
    ],
)  # fmt: skip
def test_in_english(failures: list[Failure], english: str) -> None:
    assert in_english(failures) == english


def test_in_english_renders_what_check_digest_found() -> None:
    answered = digest("zh", 人物="- 赵无极：剑客", 当前场景=OLDER_SCENE["zh"], 事实账=None)
    assert in_english(check("zh", answered)) == (
        "sections missing: 事实账; 当前场景 is not drawn from the latest turns (0% of its words are in them);"
        " 人物 names someone in none of the turns summarized: 赵无极"
    )


@pytest.mark.parametrize("pattern", ["(as an ai)?", "x*", "^"])
def test_a_banned_pattern_that_matches_empty_text_finds_only_words(pattern: str) -> None:
    settings = StorySettings(banned_patterns=(pattern,))
    assert banned_found("The lamp is lit.", settings.banned_patterns) == []
    assert banned_found("As an AI, xx.", ("(as an ai)?",)) == [Failure("banned", (("pattern", "As an AI"),))]


def test_the_reasons_are_put_in_the_language_they_are_asked_in() -> None:
    missing = Failure("missing", (("sections", ("承诺与伏笔", "事实账")),))
    english = CONTEXT_TEXTS["en"].digest_headings
    assert (
        missing.words({"missing": "missing: {sections}"}, english, ", ") == "missing: Promises and foreshadowing, Facts"
    )
    assert missing.words({"missing": "缺少：{sections}"}) == "缺少：承诺与伏笔、事实账"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "林舟：第1问。沈砚：作为AI，我无法离开这里。灯还亮着！\n第二行没事。\n作为AI整行。",
            "林舟：第1问。沈砚：…，我无法离开这里。灯还亮着！\n第二行没事。\n…整行。",
        ),
        ("没有禁用的写法。", "没有禁用的写法。"),
        ("Lin: Will you go As an AI, I cannot. The lamp is lit.", "Lin: Will you go …, I cannot. The lamp is lit."),
        ('He said "as an ai I cannot." Then he left.', 'He said "… I cannot." Then he left.'),
        ("cannot. As an\nAI here", "cannot. As an\nAI here"),  # (a pattern's words, not its line breaks)
    ],
)
def test_the_offline_summary_puts_out_what_a_banned_pattern_finds(text: str, kept: str) -> None:
    banned = ("作为AI", "(as an ai)?")
    assert without_banned(text, banned) == kept
    assert banned_found(without_banned(text, banned), banned) == []


def test_an_empty_match_is_none_and_a_later_match_is_found() -> None:
    found = banned_found("The lamp is lit. As an AI, I cannot.", ("(as an ai)?",))
    assert found == [Failure("banned", (("pattern", "As an AI"),))]
