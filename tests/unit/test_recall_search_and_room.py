"""Recall's room and the side model's search: the block's share grows with the prompt's tokens (never
below `recall_tokens`, nothing when that is 0), a search ranks passages the words share nothing with (as
one more ranking, named), an answer that is no search is refused, and the block keeps at most `most`
passages however many were found."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from domain.texts import CONTEXT_TEXTS
from domain.tree.commands.jobs import SideCall
from domain.values import StorySettings
from projections.context.recall import recall_block
from projections.recall.story_index import Hit, StoryIndex
from service.search_rewrites import SEARCH_CHARS, search_line
from tests.builders import StoryBuilder, memory_app
from tests.unit.test_story_index_depth import rows


@pytest.mark.parametrize(
    ("settings", "room"),
    [
        ({"context_window": 2000, "reply_reserve": 0}, 1024),  # (3/8 of 2,000 is less than recall_tokens)
        ({"context_window": 4000, "reply_reserve": 0}, 1500),
        ({"context_window": 32768, "reply_reserve": 4096}, 4096),  # (at most 4,096 from the share)
        ({"context_window": 32768, "reply_reserve": 4096, "recall_tokens": 6000}, 6000),
        ({"context_window": 4000, "reply_reserve": 0, "recall_share": 0}, 1024),
        ({"context_window": 4000, "reply_reserve": 0, "recall_tokens": 0}, 0),  # (off)
        ({"context_window": 4000, "reply_reserve": 4000}, 1024),
    ],
)
def test_the_recall_room_is_a_share_of_the_prompts_tokens_and_at_least_recall_tokens(
    settings: dict[str, Any], room: int
) -> None:
    assert StorySettings(**settings).recall_room == room


def test_a_search_finds_what_the_words_share_nothing_with_and_is_named_among_the_rankings() -> None:
    texts = ["青铜钥匙藏在地窖第三个酒桶底下。", *[f"第{i}天，灯还亮着，渡船会来。" for i in range(40)], "后来呢？"]
    index = StoryIndex(1, rows(texts), None)
    everywhere = lambda node: True  # noqa: E731
    alone = index.search("那个东西怎么处理的", None, 5, 10_000, everywhere)
    assert all("青铜钥匙" not in hit.row["text"] for hit in alone)
    searched = index.search("那个东西怎么处理的", None, 5, 10_000, everywhere, (), search="青铜钥匙 地窖 酒桶")
    assert "青铜钥匙" in searched[0].row["text"] and set(searched[0].found_by) == {"search"}
    both = index.search("渡船", None, 60, 10_000, everywhere, (), search="青铜钥匙")
    assert {"bm25", "search"} <= {name for hit in both for name in hit.found_by}


@pytest.mark.parametrize(
    ("answer", "line"),
    [
        ("青铜钥匙 地窖 酒桶\n", "青铜钥匙 地窖 酒桶"),
        ("\n  “brass key cellar”  \nmore words", "brass key cellar"),
        ('{"patch": {}}', None),
        ("[1, 2]", None),
        ("<think>\nThe user asks about the key.\n</think>\nSearch terms: brass key, cellar", "brass key, cellar"),
        ("检索词：青铜钥匙 地窖", "青铜钥匙 地窖"),
        ("<think>\nThe user asks about the key, so I should list", None),  # (cut off while thinking)
        ("The user asks about the key, so</think>\nbrass key cellar", "brass key cellar"),  # (opened in the prompt)
        ('"Search terms: brass key"', "brass key"),
        ("**Search terms:** brass key", "brass key"),
        ("Here are the search terms:\n- brass key cellar", "brass key cellar"),
        ("```\nbrass key cellar\n```", "brass key cellar"),
        ('```json\n{"terms": "key"}\n```', None),
        ("   \n\n", None),
    ],
)
def test_a_search_line_is_the_answers_first_line_and_no_json(answer: str, line: str | None) -> None:
    assert search_line(answer) == line


def test_a_long_search_line_is_cut_at_a_space() -> None:
    line = search_line(" ".join(["lighthouse"] * 100))
    assert line is not None and len(line) <= SEARCH_CHARS and line.endswith("lighthouse")


def test_the_block_keeps_at_most_most_passages() -> None:
    user = str(uuid4())
    hits = [
        Hit({"id": f"{node}:0", "node_id": node, "user_id": user, "depth": 2 * i + 2, "turn": i + 1, "first_turn": i,
             "text": f"第{i}句。", "user_part": 0, "user_hidden": 0, "reply_hidden": 0, "seq": 1, "kind": "turn"}, 1.0 / (i + 1))
        for i, node in enumerate(str(uuid4()) for _ in range(8))
    ]  # fmt: skip
    made = recall_block(hits, "沈砚", "林舟", 10_000, len, lambda text, c, u: text, CONTEXT_TEXTS["zh"], most=3)
    assert made is not None and len(made.node_ids) == 3 and "第0句" in made.text and "第3句" not in made.text
    made = recall_block(hits, "沈砚", "林舟", 10_000, len, lambda text, c, u: text, CONTEXT_TEXTS["zh"])
    assert made is not None and len(made.node_ids) == 8


def test_a_words_search_is_noted_once_and_only_on_the_users_words() -> None:
    story = StoryBuilder.start(memory_app())
    words = story.user("钥匙呢？")
    call = SideCall("search", "side", 120, 8, 300.0, "ok")
    noted = story.app.nodes.note_search_terms(story.tenant, words, "青铜钥匙 地窖", call).value
    again = story.app.nodes.note_search_terms(
        story.tenant, words, "", SideCall("search", "side", 0, 0, 2000.0, "timeout")
    )
    assert noted.search_terms == again.value.search_terms == "青铜钥匙 地窖"  # (a retry's timeout keeps them)
    later = story.user("那把钥匙呢？", parent=story.reply("不知道。"))
    story.app.nodes.note_search_terms(story.tenant, later, "", SideCall("search", "side", 0, 0, 2000.0, "timeout"))
    found = story.app.nodes.note_search_terms(story.tenant, later, "钥匙", call).value
    assert found.search_terms == "钥匙"  # (a "" gives way to terms)
    purposes = [e.purpose for e in story.app.events_of(words) if type(e).__name__ == "ModelCalled"]
    assert purposes == ["search", "search"]  # (each call in the ledger)
    reply = story.reply("在地窖。", parent=words)
    with pytest.raises(Exception, match="user's words"):
        story.app.nodes.note_search_terms(story.tenant, reply, "x", call)
