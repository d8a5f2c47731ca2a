"""The resident summary's budget: 4,300 characters shared with the story's own summary and the scene,
1,200 at most for it, left out under 200, else cut at a paragraph with a mark."""

from __future__ import annotations

import pytest

from domain.memory.resident import CUT_MARK, FLOOR_CHARS, RESIDENT_CHARS, SHARED_CHARS, fit_resident

PARAGRAPH = "甲" * 299  # with its blank line, 301 characters a paragraph
RESIDENT = "\n\n".join([PARAGRAPH] * 4)  # 1,202 characters: over the cap


@pytest.mark.parametrize(
    ("text", "other", "room", "shown", "cut"),
    [
        ("短的常驻摘要", 0, RESIDENT_CHARS, "whole", False),
        ("短的常驻摘要", SHARED_CHARS - 6, 6, "whole", False),  # (fits exactly the room left)
        (PARAGRAPH, SHARED_CHARS - FLOOR_CHARS, FLOOR_CHARS, "part", True),  # cut at the floor, not left out
        (PARAGRAPH, SHARED_CHARS - FLOOR_CHARS + 1, FLOOR_CHARS - 1, "none", True),  # under the floor: left out
        (RESIDENT, 0, RESIDENT_CHARS, "part", True),  # over the cap with room to spare: cut
        (RESIDENT, SHARED_CHARS, 0, "none", True),  # no room at all
        ("", 0, RESIDENT_CHARS, "none", False),  # nothing to fit
    ],
)
def test_the_budget_table(text: str, other: int, room: int, shown: str, cut: bool) -> None:
    fitted = fit_resident(text, other, "zh")
    assert fitted.room == room and fitted.cut == cut
    assert {None: "none", text: "whole"}.get(fitted.text, "part") == shown
    if fitted.text is not None:
        assert len(fitted.text) <= room


def test_a_cut_ends_at_a_paragraph_with_the_mark_in_the_cards_language() -> None:
    fitted = fit_resident(RESIDENT, 0, "zh")
    assert fitted.text == "\n\n".join([PARAGRAPH] * 3) + CUT_MARK["zh"]
    english = fit_resident(RESIDENT.replace("甲", "a"), 3_300, "en")  # 1,000 characters of room
    assert english.text is not None and english.text.endswith(CUT_MARK["en"])
    assert english.text.removesuffix(CUT_MARK["en"]) == "\n\n".join(["a" * 299] * 3)


def test_a_resident_summary_of_one_long_paragraph_is_cut_at_a_line_or_anywhere() -> None:
    lines = "\n".join(["乙" * 99] * 20)  # 1,999 characters, no blank line
    fitted = fit_resident(lines, 0, "zh")
    assert fitted.text is not None and fitted.text.endswith(CUT_MARK["zh"])
    assert fitted.text.removesuffix(CUT_MARK["zh"]).endswith("乙") and len(fitted.text) <= RESIDENT_CHARS
    solid = fit_resident("丙" * 3000, 0, "zh")
    assert solid.text == "丙" * (RESIDENT_CHARS - len(CUT_MARK["zh"])) + CUT_MARK["zh"]
