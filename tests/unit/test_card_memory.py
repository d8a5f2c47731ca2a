"""A card's memory as an aggregate: recaps once per fingerprint and never over the user's, merges due when a
recap changed or a forgotten story lingers, merges refused when they lose what they were given, the user's
edits kept, and a story forgotten and remembered again."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from domain.errors import EmptyTextError
from domain.memory.card_memory import CardMemory, MemoryStateError, RecapNotFoundError, Usage, memory_id
from domain.memory.handbook import Handbook, Item, MemoryTextError, StoryBlock, forget

CARD = UUID("00000000-0000-4000-8000-0000000000ca")
A, B = UUID("1a2b3c4d-0000-4000-8000-000000000001"), UUID("5e6f7a8b-0000-4000-8000-000000000002")
SPAN = (uuid4(), uuid4())
FREE = Usage()
BOTH = Handbook(
    (StoryBlock(A, "灯塔", "第一夜"), StoryBlock(B, "渡船", "雾")),
    (Item("characters", "沈砚左手缺两根手指", (A, B)), Item("facts", "渡船每三天一班", (B,))),
)


def recap(memory: CardMemory, story: UUID, fingerprint: str = "f1", text: str = "复盘") -> bool:
    return memory.write_recap(story, text, fingerprint, SPAN, 3, 0, "offline", FREE)


def merged(memory: CardMemory, handbook: Handbook = BOTH, resident: str = "常驻") -> CardMemory:
    assert memory.merge(handbook, resident, "offline", FREE)
    return memory


@pytest.fixture
def memory() -> CardMemory:
    memory = CardMemory.begin(CARD, "tenant-a")
    recap(memory, A)
    recap(memory, B)
    return memory


def replayed(memory: CardMemory) -> CardMemory:
    """The aggregate folded again from its events, as a load would."""
    again: CardMemory | None = None
    for event in memory.collect_events():
        again = event.mutate(again)
    assert again is not None
    return again


def test_one_memory_per_card_whose_id_follows_from_the_cards() -> None:
    memory = CardMemory.begin(CARD, "tenant-a")
    assert memory.id == memory_id(CARD) != memory_id(uuid4())
    assert (memory.card_id, memory.tenant_id) == (CARD, "tenant-a")


def test_a_recap_is_written_once_per_fingerprint(memory: CardMemory) -> None:
    assert not recap(memory, A, "f1", "again")  # the same path read again: nothing recorded
    assert recap(memory, A, "f2", "新的复盘")
    new = memory.recaps[A]
    assert (new.version, new.text, (new.first_node_id, new.last_node_id)) == (2, "新的复盘", SPAN)


def test_a_users_recap_is_never_rewritten_by_a_later_automatic_one(memory: CardMemory) -> None:
    memory.edit_recap(A, "用户写的复盘")
    assert memory.recaps[A].author is None and memory.recaps[A].version == 2
    assert not recap(memory, A, "f9", "model's")
    assert memory.recaps[A].text == "用户写的复盘"


@pytest.mark.parametrize("text", ["", "  \n"])
def test_an_empty_recap_is_refused(memory: CardMemory, text: str) -> None:
    with pytest.raises(EmptyTextError):
        recap(memory, A, "f2", text)


def test_editing_the_recap_of_a_story_with_none_is_refused(memory: CardMemory) -> None:
    with pytest.raises(RecapNotFoundError):
        memory.edit_recap(uuid4(), "x")


def test_a_merge_is_due_when_a_recap_changed_since_the_last_one(memory: CardMemory) -> None:
    assert memory.merge_due and set(memory.changed) == {A, B}
    merged(memory)
    assert not memory.merge_due and memory.merged == {A: 1, B: 1}
    recap(memory, B, "f2")
    assert set(memory.changed) == {B}


def test_a_merge_that_loses_a_story_or_a_users_item_changes_nothing(memory: CardMemory) -> None:
    only_a = Handbook((StoryBlock(A, "灯塔", "第一夜"),), ())
    events = len(memory.pending_events)
    with pytest.raises(MemoryTextError, match=str(B)):
        merged(memory, only_a)
    assert memory.handbook == Handbook() and len(memory.pending_events) == events
    merged(memory)
    edited = Handbook(BOTH.blocks, (*BOTH.items, Item("preferences", "喜欢慢节奏", (A,))))
    memory.edit_handbook(edited)
    recap(memory, B, "f2")
    with pytest.raises(MemoryTextError, match="items the user wrote"):
        merged(memory, BOTH)
    merged(memory, edited)


def test_only_what_the_user_added_or_changed_is_kept_from_later_rewrites(memory: CardMemory) -> None:
    merged(memory)
    retitled = Handbook((StoryBlock(A, "灯塔（改）", "第一夜"), BOTH.blocks[1]), BOTH.items)
    memory.edit_handbook(retitled)
    assert memory.users_items == ()  # (the items are the merge's: a rewrite may change them)
    memory.forget(A, "deleted")
    merged(memory, forget(retitled, A)[0])  # (the shared item keeps only B's tag: accepted)
    changed = Handbook(memory.handbook.blocks, (Item("facts", "渡船每周一班", (B,)),))
    memory.edit_handbook(changed)
    assert [i.text for i in memory.users_items] == ["渡船每周一班"]


def test_a_merge_that_changes_nothing_records_nothing(memory: CardMemory) -> None:
    assert merged(memory) and memory.merge(BOTH, "常驻", "offline", FREE) is False
    recap(memory, B, "f2")
    assert memory.merge(BOTH, "常驻", "offline", FREE) is True


def test_a_handbook_edit_naming_a_forgotten_story_is_refused(memory: CardMemory) -> None:
    merged(memory)
    memory.forget(A, "asked")
    with pytest.raises(MemoryTextError, match="forgotten stories"):
        memory.edit_handbook(BOTH)


def test_a_handbook_edit_naming_a_story_with_no_recap_is_refused(memory: CardMemory) -> None:
    stranger = Handbook((), (Item("facts", "x", (uuid4(),)),))
    with pytest.raises(MemoryTextError, match="no recap"):
        memory.edit_handbook(stranger)


def test_a_users_resident_summary_outlives_the_merges(memory: CardMemory) -> None:
    merged(memory, resident="模型写的")
    memory.edit_resident("用户写的常驻摘要")
    recap(memory, A, "f2")
    merged(memory, resident="模型又写的")
    assert memory.resident == "用户写的常驻摘要"


def test_forgetting_a_story_makes_a_merge_due_that_must_leave_it_out(memory: CardMemory) -> None:
    merged(memory)
    memory.forget(A, "deleted")
    assert memory.merge_due and memory.to_forget == {A} and not memory.changed
    with pytest.raises(MemoryTextError, match="told to forget"):
        merged(memory, BOTH)
    without_a, _ = forget(BOTH, A)
    merged(memory, without_a)
    assert not memory.merge_due and memory.merged == {B: 1} and memory.handbook.stories == {B}
    with pytest.raises(MemoryStateError):
        recap(memory, A, "f2")


def test_a_story_remembered_again_goes_into_the_next_merge(memory: CardMemory) -> None:
    merged(memory)
    memory.forget(A, "deleted")
    merged(memory, forget(BOTH, A)[0])
    memory.remember(A)
    assert set(memory.changed) == {A}
    merged(memory)
    assert memory.merged == {A: 1, B: 1}


def test_what_is_folded_again_from_the_events_is_the_same_memory(memory: CardMemory) -> None:
    merged(memory)
    memory.edit_recap(B, "用户的")
    memory.edit_resident("常驻")
    memory.forget(A, "asked")
    folded = replayed(memory)
    for field in ("recaps", "forgotten", "handbook", "resident", "merged", "protected", "resident_edited"):
        assert getattr(folded, field) == getattr(memory, field), field
