"""A card's handbook kept as data: its text parsed into story blocks and tagged items and back, merges
refused when they lose a story or keep a forgotten one, and a story forgotten by the program's rule."""

from __future__ import annotations

from uuid import UUID

import pytest

from domain.memory.handbook import (
    Handbook,
    Item,
    MemoryTextError,
    StoryBlock,
    Tags,
    check_merge,
    forget,
    parse_handbook,
    render_handbook,
)

A = UUID("1a2b3c4d-0000-4000-8000-000000000001")
B = UUID("5e6f7a8b-0000-4000-8000-000000000002")
C = UUID("1a2b3c4d-9999-4000-8000-000000000003")  # (begins like A)
TAGS = Tags([A, B])

TEXT = """# 局：灯塔的第一夜（1a2b3c4d）
林舟在风暴夜抵达北屿。
沈砚收下了船票。

# 局：雾中的渡船（5e6f7a8b）
渡船晚到了三天。

# 人物（跨局）
- 沈砚左手缺两根手指 [局:1a2b3c4d][局:5e6f7a8b]
- 沈砚叫林舟“林先生” [局:1a2b3c4d]

# 世界既定事实（跨局）
- 渡船每三天一班 [局:5e6f7a8b]

# 用户的玩法偏好（跨局）
- 喜欢慢节奏的对白 [局:1a2b3c4d]
"""


def test_a_handbook_text_is_read_into_blocks_and_tagged_items() -> None:
    handbook = parse_handbook(TEXT, TAGS)
    assert [(b.story_id, b.title) for b in handbook.blocks] == [(A, "灯塔的第一夜"), (B, "雾中的渡船")]
    assert handbook.blocks[0].text == "林舟在风暴夜抵达北屿。\n沈砚收下了船票。"
    assert [(i.section, i.text, i.sources) for i in handbook.items] == [
        ("characters", "沈砚左手缺两根手指", (A, B)),
        ("characters", "沈砚叫林舟“林先生”", (A,)),
        ("facts", "渡船每三天一班", (B,)),
        ("preferences", "喜欢慢节奏的对白", (A,)),
    ]
    assert handbook.stories == {A, B}


def test_the_text_written_back_reads_as_the_same_handbook() -> None:
    handbook = parse_handbook(TEXT, TAGS)
    assert render_handbook(handbook, TAGS, "zh") == TEXT
    english = render_handbook(handbook, TAGS, "en")
    assert "# Story: 灯塔的第一夜 (1a2b3c4d)" in english and "[story:5e6f7a8b]" in english
    assert parse_handbook(english, TAGS) == handbook


def test_an_items_id_stays_while_its_section_and_words_do() -> None:
    item = Item("facts", "渡船每三天一班", (B,))
    assert item.item_id == Item("facts", "渡船每三天一班", (A, B)).item_id
    assert item.item_id != Item("characters", "渡船每三天一班", (B,)).item_id
    assert parse_handbook(TEXT, TAGS).item(item.item_id) == item


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("# 人物（跨局）\n- 沈砚守塔\n", "without the tag"),
        ("# 人物（跨局）\n- 沈砚守塔 [局:deadbeef]\n", "deadbeef is no story of this card"),
        ("# 人物（跨局）\n- [局:1a2b3c4d] 沈砚守塔\n", "tags go at its end"),
        ("# 人物（跨局）\n沈砚守塔 [局:1a2b3c4d]\n", "not an item"),
        ("# 杂项\n- 沈砚守塔 [局:1a2b3c4d]\n", "unknown heading"),
        ("沈砚守塔 [局:1a2b3c4d]\n", "outside any heading"),
        ("# 局：一（1a2b3c4d）\n甲\n# 局：二（1a2b3c4d）\n乙\n", "a second block"),
        ("# 局：一（0000ffff）\n甲\n", "0000ffff is no story"),
    ],
)
def test_what_cannot_be_kept_as_data_is_refused(text: str, words: str) -> None:
    with pytest.raises(MemoryTextError, match=words):
        parse_handbook(text, TAGS)


def test_stories_whose_ids_begin_alike_get_longer_tags_than_the_rest() -> None:
    tags = Tags([A, B, C])
    assert tags.short[B] == "5e6f7a8b"
    assert tags.short[A] != tags.short[C] and len(tags.short[A]) == len(tags.short[C]) == 9
    text = f"# 人物（跨局）\n- 沈砚守塔 {tags.of(C, 'zh')}\n"
    assert parse_handbook(text, tags).items[0].sources == (C,)
    with pytest.raises(MemoryTextError, match="1a2b3c4d begins the ids of more than one story"):
        parse_handbook("# 人物（跨局）\n- 沈砚守塔 [局:1a2b3c4d]\n", tags)


def test_a_merge_that_drops_a_story_it_was_given_is_refused() -> None:
    after = Handbook((StoryBlock(A, "一", "甲"),), ())
    with pytest.raises(MemoryTextError, match=str(B)):
        check_merge({A, B}, set(), after)
    check_merge({A, B}, {B}, after)  # (told to forget B: its absence is right)


def test_a_merge_that_keeps_a_story_it_was_told_to_forget_is_refused() -> None:
    after = Handbook((), (Item("facts", "渡船每三天一班", (A, B)),))
    with pytest.raises(MemoryTextError, match="told to forget"):
        check_merge({A, B}, {B}, after)


def test_forgetting_a_story_drops_what_only_it_supported_and_only_its_tag_elsewhere() -> None:
    handbook = parse_handbook(TEXT, TAGS)
    left, mixed = forget(handbook, A)
    assert [b.story_id for b in left.blocks] == [B]
    assert [(i.text, i.sources) for i in left.items] == [("沈砚左手缺两根手指", (B,)), ("渡船每三天一班", (B,))]
    assert [i.text for i in mixed] == ["沈砚左手缺两根手指"]  # (its words may mix what each story said)
    assert left.stories == {B}
    assert forget(left, A) == (left, ())  # (forgetting twice changes nothing)
    untouched = [b for b in handbook.blocks if b.story_id == B]
    assert list(left.blocks) == untouched


def test_titles_with_brackets_lines_with_hashes_and_other_spellings_of_tags_read_back() -> None:
    handbook = Handbook(
        (StoryBlock(A, "灯塔(上)", "# 不是标题的一行\n正文"),), (Item("facts", "渡船每三天一班", (A,)),)
    )
    assert parse_handbook(render_handbook(handbook, TAGS, "zh"), TAGS) == handbook
    assert parse_handbook(render_handbook(handbook, TAGS, "en"), TAGS) == handbook
    spelled = "# story: 灯塔(上) (1a2b3c4d)\n# 不是标题的一行\n正文\n\n# 世界既定事实（跨局）\n- 渡船每三天一班 [Story：1a2b3c4d]\n"
    assert parse_handbook(spelled, TAGS) == handbook


def test_a_tag_longer_than_needed_names_its_story() -> None:
    for written in ("1a2b3c4d0", A.hex, A.hex.upper()):
        assert parse_handbook(f"# 人物（跨局）\n- 沈砚守塔 [局:{written}]\n", TAGS).items[0].sources == (A,)
