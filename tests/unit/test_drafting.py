"""Draft text rules: quote→replacement batches (all or nothing), parsing the model's edits, read and search."""

from __future__ import annotations

import pytest

from domain.errors import DraftEditError
from domain.tree.rules.drafting import Edit, apply_edits, parse_edits, read_range, search

TEXT = "雾从海面升起。灯塔的灯灭了。沈砚提着油灯上楼。"


def test_apply_edits_replaces_several_quotes_against_one_version() -> None:
    edits = [Edit("雾从海面升起", "风从北边吹来"), Edit("沈砚提着油灯上楼", "沈砚没有动")]
    assert apply_edits(TEXT, edits) == "风从北边吹来。灯塔的灯灭了。沈砚没有动。"


def test_apply_edits_resolves_every_quote_in_the_original_text_not_the_edited_one() -> None:
    # applied one after another, the second quote would occur twice; against the one version it is unique
    edits = [Edit("海面", "灯塔下"), Edit("灯塔", "塔")]
    assert apply_edits(TEXT, edits) == "雾从灯塔下升起。塔的灯灭了。沈砚提着油灯上楼。"


def test_apply_edits_allows_adjacent_quotes() -> None:
    assert apply_edits("甲乙丙", [Edit("甲", "一"), Edit("乙", "二")]) == "一二丙"


def test_apply_edits_keeps_order_independent_of_the_batch_order() -> None:
    edits = [Edit("沈砚", "他"), Edit("雾", "云")]
    assert apply_edits(TEXT, edits) == "云从海面升起。灯塔的灯灭了。他提着油灯上楼。"


def test_apply_edits_rejects_the_whole_batch_when_a_quote_is_missing() -> None:
    with pytest.raises(DraftEditError, match="not found") as refused:
        apply_edits(TEXT, [Edit("雾从海面升起", "风"), Edit("不存在的句子", "x")])
    assert "edit 2" in str(refused.value)


def test_apply_edits_rejects_the_whole_batch_when_a_quote_is_repeated() -> None:
    with pytest.raises(DraftEditError, match="more than once"):
        apply_edits(TEXT, [Edit("沈砚", "他"), Edit("灯", "火")])


def test_apply_edits_rejects_overlapping_quotes() -> None:
    with pytest.raises(DraftEditError, match="overlap"):
        apply_edits(TEXT, [Edit("灯塔的灯", "塔"), Edit("的灯灭了", "熄了")])


def test_apply_edits_rejects_the_same_quote_twice_in_one_batch() -> None:
    with pytest.raises(DraftEditError, match="overlap"):
        apply_edits(TEXT, [Edit("沈砚", "他"), Edit("沈砚", "她")])


def test_apply_edits_can_delete_a_passage() -> None:
    assert apply_edits(TEXT, [Edit("灯塔的灯灭了。", "")]) == "雾从海面升起。沈砚提着油灯上楼。"


def test_parse_edits_reads_the_models_list() -> None:
    assert parse_edits([{"old": "a", "new": "b"}, {"old": "c", "new": ""}]) == [Edit("a", "b"), Edit("c", "")]


@pytest.mark.parametrize(
    "raw",
    [None, [], "a→b", {"old": "a", "new": "b"}, 3],
    ids=["missing", "empty", "string", "object", "number"],
)
def test_parse_edits_refuses_anything_but_a_non_empty_list(raw: object) -> None:
    with pytest.raises(DraftEditError, match="non-empty list"):
        parse_edits(raw)


@pytest.mark.parametrize(
    "item",
    [{"old": "a"}, {"new": "b"}, {"old": 1, "new": "b"}, {"old": "a", "new": None}, "a", ["a", "b"]],
    ids=["no-new", "no-old", "old-not-string", "new-null", "string", "pair"],
)
def test_parse_edits_refuses_a_malformed_item_and_names_it(item: object) -> None:
    with pytest.raises(DraftEditError, match="edit 2 must be"):
        parse_edits([{"old": "x", "new": "y"}, item])


def test_parse_edits_refuses_an_empty_quote() -> None:
    with pytest.raises(DraftEditError, match="quotes nothing"):
        parse_edits([{"old": "", "new": "開頭"}])


def test_read_range_returns_the_slice_or_everything() -> None:
    assert read_range(TEXT, None, None) == TEXT
    assert read_range(TEXT, 7, 14) == "灯塔的灯灭了。"
    assert read_range(TEXT, 14, None) == "沈砚提着油灯上楼。"


def test_search_finds_every_occurrence_up_to_the_limit() -> None:
    hits = search(TEXT, "灯", 10)
    assert [at for at, _ in hits] == [i for i, ch in enumerate(TEXT) if ch == "灯"]
    assert len(search(TEXT, "灯", 2)) == 2
    assert search(TEXT, "", 5) == []
    assert search(TEXT, "船", 5) == []
