"""What a front end's request (its whole history, every time) means for the story's tree."""

from __future__ import annotations

import pytest

from domain.tree.rules.reconcile import Append, ChatMessage, Continue, PassThrough, Regenerate, decide, split_request

G = "The ferry waits at the pier."
PATH = [ChatMessage("assistant", G)] + [
    ChatMessage("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(6)
]  # g, u m0, r m1, u m2, r m3, u m4, r m5


def request(*chat: tuple[str, str], system: str = "You are Mira.", greeting: str = G) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system},
        {"role": "assistant", "content": greeting},
        *({"role": role, "content": text} for role, text in chat),
    ]


def history(upto: int) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in PATH[1 : upto + 1]]


def test_the_request_splits_into_fixed_prompt_greeting_chat_and_what_follows() -> None:
    split = split_request([
        {"role": "system", "content": "card"}, {"role": "system", "content": [{"type": "text", "text": "lore"}]},
        {"role": "assistant", "content": G}, {"role": "user", "content": "hi"},
        {"role": "system", "content": "[author's note]"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"}, {"role": "system", "content": "Summarize the chat."},
    ])  # fmt: skip
    assert split.fixed == ("card", "lore") and split.greeting == G
    assert [m.text for m in split.chat] == ["hi", "hello", "bye"]
    assert split.blocks == ("[author's note]",) and split.after == ("Summarize the chat.",)


@pytest.mark.parametrize(
    ("chat", "expected"),
    [
        ([*history(6), ("user", "new")], Append(6, (ChatMessage("user", "new"),), branch=False)),
        (history(5), Regenerate(5)),  # the previous prompt again: a swipe
        (history(6), Continue(6, "m5")),  # the last reply as it is: continue it
        ([*history(5), ("assistant", "Well,")], Append(5, (ChatMessage("assistant", "Well,"),), branch=True)),
        ([*history(2), ("user", "m2 edited"), ("assistant", "m3"), ("user", "new")],
         Append(2, (ChatMessage("user", "m2 edited"), ChatMessage("assistant", "m3"), ChatMessage("user", "new")), True)),
        ([*history(1), ("assistant", "m1 edited"), ("user", "new")],
         Append(1, (ChatMessage("assistant", "m1 edited"), ChatMessage("user", "new")), True)),
        ([*history(2), ("user", "new")], Append(2, (ChatMessage("user", "new"),), branch=True)),  # the rest deleted
        ([*history(1), ("user", "m2"), ("user", "new")],  # m1 deleted: the two user messages meet
         Append(0, (ChatMessage("user", "m0\n\nm2\n\nnew"),), True)),
        ([("user", "other")], Append(0, (ChatMessage("user", "other"),), branch=True)),
    ],
    ids=["new turn", "swipe", "continue", "prefill", "edit three back", "edited reply", "deleted tail",
         "deleted reply", "another first message"],
)  # fmt: skip
def test_a_request_is_read_against_the_path(chat: list[tuple[str, str]], expected: object) -> None:
    assert decide(split_request(request(*chat)), PATH) == expected


def test_a_system_message_after_the_chat_is_the_front_ends_own_request_unless_it_quotes_the_reply() -> None:
    quiet = split_request([*request(*history(6)), {"role": "system", "content": "Summarize the story so far."}])
    assert isinstance(decide(quiet, PATH), PassThrough)
    nudge = split_request([*request(*history(6)), {"role": "system", "content": "[Continue your last message.]"}])
    assert decide(nudge, PATH) == Continue(6, "m5")


def test_a_request_with_no_chat_is_passed_through() -> None:
    assert isinstance(decide(split_request([{"role": "system", "content": "x"}]), PATH), PassThrough)


@pytest.mark.parametrize(
    ("nudge", "continues"),
    [
        ("[Continue your last message without repeating its original content.]", True),
        ("继续你上一条回复。", True),
        ("Continue the story in character. Stay terse.", False),
        ("Pause the roleplay. Summarize the story so far; do not continue it.", False),
    ],
)
def test_only_a_continue_nudge_continues_the_last_reply(nudge: str, continues: bool) -> None:
    asked = split_request([*request(*history(6)), {"role": "system", "content": nudge}])
    assert (decide(asked, PATH) == Continue(6, "m5")) is continues


def test_a_tool_round_on_the_users_last_words_is_the_turns_and_an_earlier_one_is_history() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "dice"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "6"}
    earlier = [{"role": "user", "content": "roll"}, call, result, {"role": "assistant", "content": "A six."}]
    split = split_request([*earlier, {"role": "user", "content": "again"}, call, result])
    assert split.tool_round == (call, result)
    assert [m.text for m in split.chat] == ["roll", "A six.", "again"]  # the calls are not the chat's words
    assert split_request([*earlier, {"role": "user", "content": "again"}]).tool_round == ()
    path = [
        ChatMessage("assistant", ""),
        ChatMessage("user", "roll"),
        ChatMessage("assistant", "A six."),
        ChatMessage("user", "again"),
    ]
    assert decide(split, path) == Regenerate(3)  # the words on the path: another reply to them, with the round
