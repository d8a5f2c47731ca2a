"""A context as the proxy sends it: the client's part put where the front end had it, and every explain
block still naming the text it named."""

from __future__ import annotations

from uuid import uuid4

from projections.context.records import Context, ExplainBlock, Message
from projections.context.relayed import ClientPart, relayed, text_name


def test_the_client_part_goes_where_the_front_end_had_it_and_explain_spans_follow_their_text() -> None:
    words = "[Recall: the lamp.]\n\nIs the harbour far?"
    context = Context(
        (Message("system", "You are Mira."), Message("assistant", "Hello."), Message("user", words)),
        (
            ExplainBlock("system", "card", (), 13, 4, 0, span=(0, 13), end_message=0),
            ExplainBlock("verbatim", "turns", (), 6, 3, 1, span=(0, 6), end_message=1),
            ExplainBlock("recall", "recalled", (), 19, 6, 2, span=(0, 19), end_message=2),
            ExplainBlock("user", "words", (), 19, 5, 2, span=(21, 40), end_message=2),
        ),
        tokens=18,
        budget=100,
        leaf_id=uuid4(),
    )
    part = ClientPart(
        ("You are Mira.",), blocks=("[note one]", "[note two]"), after=("Stay in character.",), prefill="'Two"
    )
    sent = relayed(context, part, len)
    assert [(m.role, m.content) for m in sent.messages] == [
        ("system", "You are Mira."), ("assistant", "Hello."), ("system", "[note one]"), ("system", "[note two]"),
        ("user", words), ("assistant", "'Two"), ("system", "Stay in character."),
    ]  # fmt: skip
    before = {(b.what, context.messages[b.message_index].content[slice(*b.span)]) for b in context.explain if b.span}  # type: ignore[index]
    after = {(b.what, sent.messages[b.message_index].content[slice(*b.span)]) for b in sent.explain if b.span}  # type: ignore[index]
    assert before <= after
    assert {("client block", "[note one]"), ("client block", "[note two]"), ("prefill", "'Two"),
            ("client after", "Stay in character.")} <= after  # fmt: skip
    assert sent.tokens == context.tokens + sum(map(len, ("[note one]", "[note two]", "'Two", "Stay in character.")))
    kept = {text_name(text): text for text in part.texts()}
    assert ClientPart.from_manifest(part.manifest(), kept.get) == part
    assert ClientPart.from_manifest(part.manifest(), {**kept, text_name("[note two]"): None}.get) is None
    lore = ClientPart(("You are Mira.", "[lore: the reef]"))
    assert set(lore.texts()) & set(part.texts()) == {"You are Mira."}  # (a text shared: kept once)


def test_a_context_that_does_not_end_with_the_users_words_gets_no_blocks_inside_it() -> None:
    context = Context((Message("system", "s"), Message("assistant", "Hello.")), (), 2, 100, uuid4())
    sent = relayed(context, ClientPart(("s",), blocks=("[note]",)), len)
    assert [m.content for m in sent.messages] == ["s", "Hello."]
