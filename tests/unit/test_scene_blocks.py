"""The scene in the prompt: the 【世界状态】 and 【登场名录】 blocks as rendered from a snapshot and a roster."""

from __future__ import annotations

import pytest

from domain.texts import ZH
from domain.tree.rules.scene import CharacterState, Roster, SceneSnapshot
from projections.context.scene import format_roster, format_state

EMPTY = SceneSnapshot()
SHEN = CharacterState(affinity=10, status="疲惫", notes="答应修灯", at="灯塔")
SCENE = SceneSnapshot(
    time="第二天清晨",
    location="灯塔",
    characters={"沈砚": SHEN},
    inventory=("黄铜怀表（User持有）",),
    flags={"天气": "大雾"},
    plot_threads=("灯为何熄灭",),
)


@pytest.mark.parametrize(
    ("snapshot", "text"),
    [
        (EMPTY, "（尚无记录）"),
        (
            SCENE,
            "时间：第二天清晨\n地点：灯塔\n沈砚：好感 10；状态：疲惫；在场；备注：答应修灯\n"
            "物品：黄铜怀表（User持有）\n天气：大雾\n剧情线：「灯为何熄灭」",
        ),
        (
            SceneSnapshot(location="灯塔", characters={"老周": CharacterState(-5, at="码头")}),
            "地点：灯塔\n老周：好感 -5；在：码头",
        ),
        (SceneSnapshot(characters={"阿青": CharacterState(notes="怕水")}), "阿青：好感 0；备注：怕水"),
        (
            SceneSnapshot(inventory=("钥匙", "油灯"), plot_threads=("甲", "乙")),
            "物品：钥匙、油灯\n剧情线：「甲」 「乙」",
        ),
        (SceneSnapshot(flags={"誓言": "守灯", "天气": "晴"}), "誓言：守灯\n天气：晴"),
    ],
    ids=["empty", "full", "elsewhere", "no-at", "lists", "flags"],
)
def test_format_state_renders_lines_in_order(snapshot: SceneSnapshot, text: str) -> None:
    assert format_state(snapshot, ZH) == text


@pytest.mark.parametrize(
    ("roster", "text"),
    [
        (Roster(), "（尚无登记）"),
        (
            Roster(
                characters={"沈砚": "清晨", "老周": ""},
                places={"灯塔": "清晨"},
                items={"钥匙": "夜"},
                events={"灯为何熄灭": "清晨"},
            ),
            "人物：沈砚（清晨）、老周；地点：灯塔（清晨）；物品：钥匙（夜）；剧情线：灯为何熄灭（清晨）",
        ),
        (Roster(events={"甲": "夜"}), "剧情线：甲（夜）"),
    ],
    ids=["empty", "all-sections", "one-section"],
)
def test_format_roster_renders_sections(roster: Roster, text: str) -> None:
    assert format_roster(roster, ZH) == text


@pytest.mark.parametrize(("count", "bare"), [(100, False), (200, True)])
def test_format_roster_section_falls_back_to_bare_names_when_over_budget(count: int, bare: bool) -> None:
    names = [f"人{i:03d}" for i in range(count)]
    text = format_roster(Roster(characters=dict.fromkeys(names, "第一天"), places={"灯塔": "第一天"}), ZH)
    people, places = text.split("；")
    assert (people == "人物：" + "、".join(names)) is bare
    assert places == "地点：灯塔（第一天）"
