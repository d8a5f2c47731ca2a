"""Reading a proxied request carried on from the body it repeats: the same request as reading it whole,
whatever the front end changed between two requests — and carried on where a front end's next request
repeats the last one."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.proxy_requests import BadRequest, ProxyRequest, RequestReader, read_whole

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
STEPS = st.sampled_from(["exchange", "swipe", "jailbreak", "no jailbreak", "temperature", "edit", "note", "model"])


def encode(body: dict[str, Any], pretty: bool, messages_first: bool) -> bytes:
    ordered = dict(body) if not messages_first else {"messages": body["messages"], **body}
    if pretty:
        return json.dumps(ordered, indent=2, ensure_ascii=True).encode()
    return orjson.dumps(ordered)


def same(read: ProxyRequest, whole: ProxyRequest) -> None:
    assert dict(read.fields) == dict(whole.fields)
    assert list(read.messages) == list(whole.messages)
    assert read.split == whole.split
    for k in range(len(whole.digests)):
        assert read.digests.at(k) == whole.digests.at(k)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(STEPS, TEXT), min_size=1, max_size=14),
    st.booleans(),
    st.booleans(),
    st.integers(0, 6),
)
def test_a_body_read_on_from_the_one_it_repeats_is_the_body_read_whole(
    steps: list[tuple[str, str]], pretty: bool, messages_first: bool, touched: int
) -> None:
    reader = RequestReader(keep_from=0)
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "card"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "first"},
    ]
    body: dict[str, Any] = {"model": "m", "temperature": 0.5}
    jailbreak, carried = False, 0
    for i, (step, text) in enumerate(steps):
        if step == "exchange":  # the reply to the last request, and the user's next words
            chat += [{"role": "assistant", "content": f"re: {i}"}, {"role": "user", "content": text}]
        elif step == "jailbreak" or step == "no jailbreak":
            jailbreak = step == "jailbreak"
        elif step == "temperature":
            body["temperature"] = i / 10
        elif step == "edit":
            at = min(2 + touched, len(chat) - 1)
            chat[at] = {**chat[at], "content": text}
        elif step == "note":  # an author's note at depth 1
            chat.insert(len(chat) - 1, {"role": "system", "content": f"[note {text}]"})
        elif step == "model":
            body["model"] = text
        messages = [*chat, {"role": "system", "content": "stay in character"}] if jailbreak else chat
        raw = encode({**body, "messages": messages}, pretty, messages_first)
        read = reader.read("t", raw)
        carried += read.carried > 0
        same(read, read_whole(raw))
    if messages_first and [step for step, _ in steps[1:]].count("exchange") > 1:
        assert carried  # (the test reads on from kept bodies)


def test_the_next_request_of_a_chat_is_carried_on_from_the_last_one() -> None:
    reader = RequestReader(keep_from=0)
    chat = [{"role": "assistant", "content": "你好"}]
    carried = []
    for turn in range(4):
        chat.append({"role": "user", "content": f"第{turn}句"})
        raw = orjson.dumps({"messages": chat, "model": "m", "stream": turn % 2 == 0})
        read = reader.read("t", raw)
        same(read, read_whole(raw))
        carried.append(read.carried)
        chat.append({"role": "assistant", "content": f"回{turn}"})
    assert carried[0] == 0
    assert all(0 < c < len(raw) for c in carried[1:])
    again = reader.read("other tenant", raw)
    assert again.carried == 0  # another tenant's body is not carried on from


def test_a_broken_tail_is_refused_as_a_whole_reading_refuses_it() -> None:
    reader = RequestReader(keep_from=0)
    chat = [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "a"}]
    reader.read("t", orjson.dumps({"messages": chat}))
    good = orjson.dumps({"messages": [*chat, {"role": "assistant", "content": "b"}]})
    for broken, field in (
        (good[:-3], "body"),
        (good[:-2] + b",7]}", "messages"),
        (good[:-1] + b',"stream":"yes"}', "stream"),
        (good[:-2] + b',{"role":"user","content":NaN}]}', "body"),
    ):
        with pytest.raises(BadRequest) as refused:
            reader.read("t", broken)
        assert refused.value.field == field
    assert reader.read("t", good).carried > 0  # (what was kept is still there)


def test_kept_bodies_are_bounded() -> None:
    reader = RequestReader(bodies=2, keep_from=0)
    raws = [orjson.dumps({"messages": [{"role": "user", "content": f"chat {n}"}]}) for n in range(3)]
    for raw in raws:
        reader.read("t", raw)
    assert reader.read("t", raws[0]).carried == 0  # the first chat's body went first
    assert reader.read("t", raws[2]).carried > 0


@pytest.mark.parametrize(
    ("kept", "then"),
    [
        (b'{"messages":[{"role":"user","content":"a"}],"model":"m","messages":[{"role":"user","content":"b"}]}',
         b'{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"c"}]}'),
        (b'{"stream":false,"messages":[{"role":"user","content":"a"}],"stream":true}',
         b'{"stream":false,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"c"}]}'),
    ],
)  # fmt: skip
def test_a_body_with_a_key_twice_is_not_carried_on_from(kept: bytes, then: bytes) -> None:
    reader = RequestReader(keep_from=0)
    reader.read("t", kept)
    read = reader.read("t", then)
    assert read.carried == 0
    same(read, read_whole(then))


def test_an_ending_that_is_not_json_is_refused_however_the_body_is_read() -> None:
    reader = RequestReader(keep_from=0)
    chat = [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "a"}]
    reader.read("t", orjson.dumps({"messages": chat}))
    good = orjson.dumps({"messages": [*chat, {"role": "assistant", "content": "b"}]})
    for broken in (good[:-1] + b",}", good + b"\x0c", good + "\xa0".encode()):
        with pytest.raises(BadRequest):
            read_whole(broken)
        with pytest.raises(BadRequest):
            reader.read("t", broken)


def test_a_chat_with_a_jailbreak_after_it_keeps_one_body_and_leaves_room_for_others() -> None:
    reader = RequestReader(bodies=3, keep_from=0)  # (copies of the one chat would push the other out)
    other = orjson.dumps({"messages": [{"role": "user", "content": "another tenant's chat"}]})
    reader.read("u", other)
    chat: list[dict[str, str]] = []
    for turn in range(12):
        chat += [{"role": "user", "content": f"words {turn}"}]
        read = reader.read("t", orjson.dumps({"messages": [*chat, {"role": "system", "content": "stay in character"}]}))
        assert read.carried or turn == 0
        chat += [{"role": "assistant", "content": f"reply {turn}"}]
    assert len([k for k in reader._kept if k.tenant_id == "t"]) == 1
    assert reader.read("u", other).carried > 0


def test_a_long_tail_is_not_read_on_where_at_most_so_much_may_be() -> None:
    reader = RequestReader(keep_from=0)
    chat = [{"role": "user", "content": "a"}]
    reader.read("t", orjson.dumps({"messages": chat}))
    longer = orjson.dumps({"messages": [*chat, {"role": "assistant", "content": "b" * 5000}]})
    assert reader.read_on("t", longer, most=1000) is None
    assert reader.read_on("t", longer) is not None
