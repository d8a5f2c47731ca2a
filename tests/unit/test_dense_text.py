"""What the dense retriever embeds: each passage after the end of the one before it on its own path,
never one from another branch."""

from __future__ import annotations

from projections.recall.dense_text import CONTEXT_CHARS, previous_passages, with_previous


def row(reply: str, part: int, user: str) -> dict[str, object]:
    return {"id": f"{reply}:{part}", "node_id": reply, "user_id": user}


def test_the_passage_before_is_the_previous_part_or_the_last_part_of_the_parent_turn() -> None:
    rows = [
        row("r1", 0, "u1"), row("r1", 1, "u1"),  # the first turn, cut in two; u1 answers the greeting
        row("r3", 0, "u3"),  # a branch from r1, archived before r2
        row("r2", 0, "u2"), row("r4", 0, "u4"),
    ]  # fmt: skip
    parents = {"u1": "greeting", "r1": "u1", "u2": "r1", "r2": "u2", "u3": "r1", "r3": "u3", "u4": "r2", "r4": "u4"}
    assert previous_passages(rows, parents) == [None, 0, 1, 1, 3]


def test_a_turn_after_the_greeting_or_an_unknown_parent_stands_alone() -> None:
    rows = [row("r1", 0, "u1"), row("r2", 0, "u2")]
    assert previous_passages(rows, {"u2": "r1"}) == [None, 0]
    assert previous_passages(rows, {}) == [None, None]  # a parent the read models do not know yet


def test_the_previous_text_is_cut_from_its_end() -> None:
    texts = ["x" * (CONTEXT_CHARS + 50) + "end", "this one"]
    first, second = with_previous(texts, [None, 0])
    assert first == texts[0]
    assert second == "x" * (CONTEXT_CHARS - 3) + "end\nthis one"


def test_a_turn_after_a_stopped_reply_follows_the_last_reply_with_passages() -> None:
    rows = [row("r1", 0, "u1"), row("r3", 0, "u3")]  # r2 was stopped: no passages
    parents = {"u1": "greeting", "r1": "u1", "u2": "r1", "r2": "u2", "u3": "r2"}
    assert previous_passages(rows, parents) == [None, 0]


def test_context_never_pushes_a_long_chinese_passage_past_one_embedding_window() -> None:
    long_chinese = "灯" * 600  # ~450 tokens already
    short = "他说好。"
    _, after_long, after_short = with_previous(["海" * 400, long_chinese, short], [None, 0, 0])
    assert after_long.endswith(long_chinese) and len(after_long) - len(long_chinese) <= 41
    assert after_short == "海" * CONTEXT_CHARS + "\n" + short
    assert with_previous(["x", "灯" * 700], [None, 0])[1] == "灯" * 700  # no room at all
