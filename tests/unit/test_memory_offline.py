"""Card memory without a side model: a recap assembled from the story's digest and episodes, and a merge
that is a deterministic, tagged concatenation within the caps, which forgetting and the audit work on."""

from __future__ import annotations

from uuid import UUID

from domain.memory.handbook import Item, Tags, check_merge, forget, parse_handbook, render_handbook
from domain.memory.offline_merge import RESIDENT_HEADING, offline_merge
from domain.memory.recaps import offline_recap, recap_sections, recap_title
from domain.memory.resident import RESIDENT_CHARS

A, B = UUID("1a2b3c4d-0000-4000-8000-000000000001"), UUID("5e6f7a8b-0000-4000-8000-000000000002")
DIGEST_A = {
    "前情提要": "林舟在风暴夜抵达北屿，沈砚收下了船票。",
    "人物": "- 沈砚：守塔人，左手缺两根手指\n- 林舟：气象局的人",
    "事实账": "- 渡船每三天一班。\n- 灯油快用完了",
    "承诺与伏笔": "- 沈砚答应明早带林舟去看灯室",
}
DIGEST_B = {"前情提要": "雾里渡船晚到三天。", "人物": "- 沈砚：守塔人，左手缺两根手指", "事实账": "- 渡船每三天一班"}


def recaps() -> dict[UUID, str]:
    return {
        A: offline_recap("灯塔的第一夜", DIGEST_A, ["第二天清晨，雾散了。"], "zh"),
        B: offline_recap("雾中的渡船", DIGEST_B, [], "zh"),
    }


def test_an_offline_recap_is_the_digest_in_the_recaps_sections() -> None:
    text = recaps()[A]
    assert recap_title(text) == "灯塔的第一夜"
    sections = recap_sections(text)
    assert sections["剧情脉络"] == "林舟在风暴夜抵达北屿，沈砚收下了船票。\n\n第二天清晨，雾散了。"
    assert sections["人物与关系"] == DIGEST_A["人物"] and sections["既定事实"] == DIGEST_A["事实账"]
    assert sections["未了之事"] == DIGEST_A["承诺与伏笔"] and sections["用户的玩法偏好"] == "无"


def test_an_english_recap_has_english_headings_and_reads_back_the_same() -> None:
    text = offline_recap("The first night", {"人物": "- Mira, the ferry pilot"}, ["They met."], "en")
    assert "## Characters and relationships" in text and "## The user's play preferences\nnone" in text
    assert recap_sections(text)["人物与关系"] == "- Mira, the ferry pilot"


def test_the_offline_merge_tags_each_line_with_every_story_that_says_it() -> None:
    handbook, _ = offline_merge(recaps(), [A, B], "zh")
    assert [(b.story_id, b.title) for b in handbook.blocks] == [(A, "灯塔的第一夜"), (B, "雾中的渡船")]
    by_text = {item.text: (item.section, item.sources) for item in handbook.items}
    assert by_text["沈砚：守塔人，左手缺两根手指"] == ("characters", (A, B))
    assert by_text["渡船每三天一班。"] == ("facts", (A, B))  # (the closing stop aside, the same line)
    assert by_text["灯油快用完了"] == ("facts", (A,))
    assert not any(item.section == "preferences" for item in handbook.items)  # ("无" is no item)
    check_merge({A, B}, set(), handbook)
    tags = Tags([A, B])
    assert parse_handbook(render_handbook(handbook, tags, "zh"), tags) == handbook


def test_the_offline_merge_is_deterministic_and_within_its_caps() -> None:
    assert offline_merge(recaps(), [A, B], "zh") == offline_merge(recaps(), [A, B], "zh")
    full, _ = offline_merge(recaps(), [A, B], "zh")
    cap = len(render_handbook(full, Tags([A, B]), "zh")) - 10
    small, resident = offline_merge(recaps(), [A, B], "zh", handbook_chars=cap)
    assert 0 < len(small.items) < len(full.items)
    assert len(render_handbook(small, Tags([A, B]), "zh")) <= cap
    assert [b.story_id for b in small.blocks] == [A, B]  # (the blocks are never left out)
    assert resident.startswith(RESIDENT_HEADING["zh"]) and len(resident) <= RESIDENT_CHARS
    many = {A: offline_recap("长", {"事实账": "\n".join(f"- 事实{i}" for i in range(400))}, [], "zh")}
    _, long_resident = offline_merge(many, [A], "zh")
    assert len(long_resident) <= RESIDENT_CHARS and "- 事实0" in long_resident


def test_forgetting_a_story_after_an_offline_merge_leaves_the_others_word_for_word() -> None:
    handbook, _ = offline_merge(recaps(), [A, B], "zh")
    left, mixed = forget(handbook, A)
    assert left.stories == {B}
    assert {i.text for i in mixed} == {"沈砚：守塔人，左手缺两根手指", "渡船每三天一班。"}
    assert [b for b in left.blocks] == [b for b in handbook.blocks if b.story_id == B]
    assert offline_merge({B: recaps()[B]}, [A, B], "zh")[0].stories == {B}


def test_a_users_items_are_kept_by_the_offline_merge_with_only_the_stories_still_there() -> None:
    users = Item("facts", "灯塔在岛的北端", (A, B))
    handbook, _ = offline_merge(recaps(), [A, B], "zh", keep=[users])
    assert users in handbook.items
    alone, _ = offline_merge({B: recaps()[B]}, [A, B], "zh", keep=[users])
    assert Item("facts", "灯塔在岛的北端", (B,)) in alone.items
    assert offline_merge({}, [A, B], "zh", keep=[users])[0].items == ()


def test_many_stories_keep_the_resident_summary_within_its_cap_and_a_story_out_of_order_is_merged() -> None:
    many = {
        UUID(int=i): offline_recap(f"第{i}局：一个相当长的标题，写满了这一局发生的事", DIGEST_B, [], "zh")
        for i in range(80)
    }
    handbook, resident = offline_merge(many, list(many), "zh")
    assert len(resident) <= RESIDENT_CHARS and "渡船每三天一班" in resident and "第79局" in resident
    late = UUID(int=999)
    handbook, _ = offline_merge({**recaps(), late: recaps()[B]}, [A, B], "zh")
    assert [b.story_id for b in handbook.blocks] == [A, B, late]


def test_a_recaps_sub_headings_stay_in_their_section() -> None:
    text = "# 标题\n## 人物与关系\n### 沈砚\n- 守塔人\n### 林舟\n- 气象局的人\n## 既定事实\n- 渡船每三天一班"
    sections = recap_sections(text)
    assert sections["人物与关系"] == "### 沈砚\n- 守塔人\n### 林舟\n- 气象局的人"
    assert recap_title(text) == "标题" and recap_title("## 剧情脉络\n……") == ""
