"""The compaction policy and the offline summarizer, table by table (pure; no store involved)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal
from uuid import uuid4

import pytest

from domain.tree.rules.compaction import announce, count_turns, plan_pack
from domain.tree.rules.extractive import Line, digest_budget, fold_digest, sentences, summarize_episode
from domain.values import DIGEST_SECTIONS, NodeView, StorySettings


def path(turns: int, chars: int = 10, greeting: bool = True) -> list[NodeView]:
    """A path root→leaf: an optional greeting, then `turns` user/reply pairs of `chars` characters each."""
    nodes: list[NodeView] = []

    def add(kind: Literal["greeting", "user", "reply"], turn: int) -> None:
        parent = nodes[-1].id if nodes else None
        when = datetime(2026, 1, 1, tzinfo=UTC)
        text = "字" * chars
        nodes.append(
            NodeView(uuid4(), uuid4(), parent, kind, len(nodes), turn, text, False, False, 0, "final", 0, 1, when)
        )

    if greeting:
        add("greeting", 0)
    for turn in range(1, turns + 1):
        add("user", turn)
        add("reply", turn)
    return nodes


@pytest.mark.parametrize(
    ("turns", "settings", "covered_turns"),
    [
        (35, {}, None),  # keep 6 + pack 30: not yet
        (36, {"min_pack_chars": 0}, (0, 30)),  # the greeting rides along with turns 1–30
        (36, {"min_pack_chars": 601}, (0, 30)),  # 30 turns × 20 chars + the greeting's 10 = 610
        (36, {"min_pack_chars": 611}, None),  # too little text, and no room to grow into the kept turns
        (40, {"min_pack_chars": 680}, (0, 34)),  # grown turn by turn until the text is enough (690)
        (10, {"keep_turns": 2, "pack_turns": 3, "min_pack_chars": 0}, (0, 3)),
        (10, {"pack_turns": 0, "min_pack_chars": 0}, None),  # automatic compaction off
    ],
)
def test_a_pack_is_due_at_keep_plus_pack_turns_with_enough_text(
    turns: int, settings: dict[str, int], covered_turns: tuple[int, int] | None
) -> None:
    plan = plan_pack(path(turns), StorySettings(**settings))
    if covered_turns is None:
        assert plan is None
    else:
        assert plan is not None and (plan.first_turn, plan.last_turn) == covered_turns
        assert plan.end.kind == "reply" and plan.after_id is None and plan.nodes[0].kind == "greeting"


def test_a_manual_pack_takes_everything_but_keep_turns_from_500_characters() -> None:
    settings = StorySettings(keep_turns=6, pack_turns=0)
    plan = plan_pack(path(20, chars=20), settings, manual=True)
    assert plan is not None and (plan.first_turn, plan.last_turn) == (0, 14)
    assert plan_pack(path(20, chars=5), settings, manual=True) is None  # 14 turns × 10 chars + 5 < 500
    assert plan_pack(path(6, chars=500), settings, manual=True) is None  # nothing beyond the kept turns


def test_a_later_pack_starts_right_after_the_last_summary() -> None:
    below = path(40, greeting=False)[4:]  # turns 3… (as if turns 1–2 were summarized)
    plan = plan_pack(below, StorySettings(keep_turns=6, pack_turns=30, min_pack_chars=0))
    assert plan is not None and (plan.first_turn, plan.last_turn) == (3, 32) and plan.after_id == below[0].parent_id
    assert count_turns(below) == 38


@pytest.mark.parametrize(
    ("uncovered", "expected"),
    [(35, False), (36, True), (37, False), (66, True), (156, True), (186, False)],
)
def test_a_reply_announces_when_due_and_again_every_pack_while_the_path_lags(uncovered: int, expected: bool) -> None:
    assert announce(uncovered, StorySettings()) is expected


@pytest.mark.parametrize(
    ("lines", "told", "small_talk"),
    [
        (
            [
                Line("Melanie", "Wow, Caroline, that's so awesome!", 1),
                Line("Caroline", "She gave me a silver locket shaped like a lighthouse, carved in Gothenburg.", 1),
                Line("Melanie", "Thanks so much, Caroline, that's really sweet!", 2),
                Line("Caroline", "Yeah, I really love it, Melanie!", 2),
            ],
            "silver locket",
            "so awesome",
        ),
        (
            [
                Line("林舟", "嗯嗯，沈砚，真好啊！", 1),
                Line("沈砚", "我把那封信压在灯塔地下室第三块砖后面，钥匙交给了渡船的船长。", 1),
                Line("林舟", "好的好的，沈砚，谢谢你啊！", 2),
                Line("沈砚", "嗯，林舟，不客气呀。", 2),
            ],
            "第三块砖",
            "真好啊",
        ),
        (
            [
                Line("林舟", "哇，沈砚，你今天真的太厉害了，我好开心啊！", 1),
                Line("沈砚", "我把那封信压在灯塔地下室第三块砖后面，钥匙交给了渡船的船长。", 1),
                Line("林舟", "不客气呀林舟，能和你说说话我也特别高兴。", 2),
                Line("沈砚", "That’s so sweet, you’re really wonderful, I’d love that!", 2),
            ],
            "第三块砖",
            "太厉害了",
        ),
    ],
)
def test_the_offline_summarizer_keeps_what_a_sentence_tells_over_small_talk(
    lines: list[Line], told: str, small_talk: str
) -> None:
    """A sentence of things named once in the pack outranks greetings and thanks that name the other speaker."""
    summary = summarize_episode(lines, [lines[1].speaker, lines[0].speaker], budget=len(lines[1].text) + 12)
    assert told in summary and small_talk not in summary


def test_the_offline_summarizer_keeps_story_order_and_its_budget() -> None:
    lines = [
        Line("林舟", "你守了多久？这座灯塔是1923年建的吗？", 1),
        Line("沈砚", "七年。我答应过老周，等他回来。灯每晚亮到清晨五点。", 1),
        Line("林舟", "Will you tell me the secret of the third lamp? I promise to keep it.", 2),
        Line("沈砚", "Maybe tomorrow. The ferry comes in three days.", 2),
    ]
    assert sentences(lines[3].text) == ["Maybe tomorrow.", "The ferry comes in three days."]
    short = summarize_episode(lines, ["沈砚", "老周"], budget=60)
    assert len(short) <= 60 and "答应过老周" in short  # a promise with a name outranks small talk
    whole = summarize_episode(lines, ["沈砚"])
    assert whole.index("七年") < whole.index("Maybe tomorrow") and summarize_episode(lines, ["沈砚"]) == whole

    digest = fold_digest(None, [(1, 2, whole)], lines[2:], ["沈砚", "林舟", "老周"], "时间：第一夜")
    assert list(digest) == list(DIGEST_SECTIONS)
    assert digest["当前场景"].startswith("时间：第一夜") and "ferry" in digest["当前场景"]
    assert "七年" not in digest["当前场景"]  # the latest covered turns, not the first
    assert "答应过老周" in digest["承诺与伏笔"] and "1923" in digest["事实账"]
    assert digest["人物"].count("\n") == 2  # one line per known name
    again = fold_digest({**digest, "承诺与伏笔": "- 沈砚：不熄灯。"}, [(3, 4, "沈砚：渡船到了。")], [], ["沈砚"])
    assert again["承诺与伏笔"].startswith("- 沈砚：不熄灯。") and "第1–2轮" in again["前情提要"]


def test_the_kept_episodes_take_their_room_from_the_digests_outline() -> None:
    assert digest_budget(0) - digest_budget(3) == 3 * 600 and digest_budget(3) == digest_budget(5)  # outline floor
    lines = [Line("沈砚", f"第{i}天，灯塔的油还够{i}天，我答应你。", i) for i in range(1, 200)]
    packs = [(i, i + 29, summarize_episode(lines[i : i + 30])) for i in range(0, 180, 30)]
    big = fold_digest(None, packs, lines[-4:], ["沈砚"])
    small = fold_digest(None, packs, lines[-4:], ["沈砚"], budget=digest_budget(3))
    assert len(small["前情提要"]) <= 600 < len(big["前情提要"]) <= 2400
    assert {k: v for k, v in small.items() if k != "前情提要"} == {k: v for k, v in big.items() if k != "前情提要"}


def test_folding_again_shortens_the_oldest_outline_entries_first() -> None:
    lines = [Line("沈砚", f"第{i}天。灯塔的油还够{i}天。我答应你{i}次。", i) for i in range(1, 400)]
    digest: dict[str, str] | None = None
    for start in range(0, 390, 30):
        digest = fold_digest(digest, [(start, start + 29, summarize_episode(lines[start : start + 30]))], [])
    assert digest is not None
    entries = digest["前情提要"].splitlines()
    assert len(entries) == 13 and len(digest["前情提要"]) <= 2400  # every pack still has its line
    assert entries[0].endswith("…") and not entries[-1].endswith("…")  # the oldest were shortened, not dropped
