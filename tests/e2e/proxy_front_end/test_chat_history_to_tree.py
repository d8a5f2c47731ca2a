"""A front end sending its whole chat every time ends with the right tree: turns, swipes, edits, continues, prefills."""

from __future__ import annotations

import asyncio
from itertools import count

from providers.fake_server import FakeModelServer, Text
from tests.e2e.proxy_front_end.front_end import GREETING, SYSTEM, Front, path_texts


async def test_turns_swipes_an_edit_a_continue_and_a_quiet_request_make_the_right_tree(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("'Climb aboard.'"), Text(["'The fog ", "is thick.'"]))
    first, headers = await front.send("Is there room for one more?")
    story = headers["x-changji-story"]
    assert first == "'Climb aboard.'" and headers["x-changji-recorded"] == "true"
    second, headers = await front.send("How long is the crossing?", stream=True)
    assert second == "'The fog is thick.'" and headers["x-changji-story"] == story  # found again by its content
    assert await path_texts(front.api, story) == [
        ("greeting", GREETING), ("user", "Is there room for one more?"), ("reply", first),
        ("user", "How long is the crossing?"), ("reply", second),
    ]  # fmt: skip

    front.chat.pop()  # a swipe: the front end resends the previous prompt unchanged
    fake.script(Text("'An hour, if the sea is kind.'"))
    swiped, headers = await front.send(None, stream=True)
    siblings = await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}/siblings")
    assert sorted(n["text"] for n in siblings["nodes"]) == sorted([second, swiped])

    fake.script(Text("'Two hours, then.'"))
    edited = [*front.messages()[:4], {"role": "user", "content": "How long, truly?"}]  # an edit two messages back
    text, headers = await front.complete(edited, stream=False)
    path = await path_texts(front.api, story)
    assert path == [
        ("greeting", GREETING), ("user", "Is there room for one more?"), ("reply", first),
        ("user", "How long, truly?"), ("reply", "'Two hours, then.'"),
    ]  # fmt: skip
    tree = await front.api.call("GET", f"/v1/stories/{story}/tree")
    assert len(tree["nodes"]) == 8  # nothing lost: the old branch stays

    quiet = [*front.messages(), {"role": "system", "content": "Summarize the story so far in one line."}]
    fake.script(Text("A ferry, a fog, a passenger."))
    summary, headers = await front.complete(quiet, stream=False)
    assert headers["x-changji-recorded"] == "false" and summary == "A ferry, a fog, a passenger."
    assert fake.requests[-1]["messages"] == quiet  # passed through unchanged
    assert len((await front.api.call("GET", f"/v1/stories/{story}/tree"))["nodes"]) == 8

    continued = [*edited, {"role": "assistant", "content": text}]  # continue the last reply
    fake.script(Text(" 'Maybe three.'", prompt_tokens=321))
    calls = (await front.api.call("GET", f"/v1/stories/{story}/costs"))["calls"]
    more, headers = await front.complete(continued, stream=True)
    costs = await front.api.call("GET", f"/v1/stories/{story}/costs")
    assert costs["calls"] == calls + 1  # the continue's call in the ledger too
    assert headers["x-changji-recorded"] == "true"
    reply = await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}")
    assert reply["text"] == "'Two hours, then.' 'Maybe three.'" and more == " 'Maybe three.'"


async def test_a_chat_of_two_hundred_turns_sent_as_front_ends_send_it_ends_as_the_right_tree(
    fake: FakeModelServer, front: Front
) -> None:
    """The whole history every time; swipes every 25 turns, an edit three turns back at 120, a continue at
    150, a summary request of the front end's own every 40 turns: siblings, a branch, nothing lost, nothing
    duplicated, and the upstream got the compacted context, not the history."""
    replies = count()
    fake.fallback = lambda body: Text(f"Reply {next(replies)} to: {body['messages'][-1]['content'][-40:]}")
    _, headers = await front.send("Turn 0: hello?")
    story = headers["x-changji-story"]
    card = (await front.api.call("GET", f"/v1/stories/{story}"))["card_id"]
    settings = {"keep_turns": 4, "pack_turns": 10, "min_pack_chars": 0, "context_window": 2048, "reply_reserve": 256}
    await front.api.call("PATCH", f"/v1/cards/{card}", {"settings": settings})
    swipes = edits = continues = quiet = 0
    for turn in range(1, 200):
        _, headers = await front.send(f"Turn {turn}: what do you see on the water now?")
        assert headers["x-changji-story"] == story and headers["x-changji-recorded"] == "true"
        if turn % 25 == 0:  # a swipe: the last reply dropped, the same prompt again
            front.chat.pop()
            await front.send(None)
            swipes += 1
        if turn % 40 == 0:  # the front end's own summary request: forwarded, not recorded
            asked = [*front.messages(), {"role": "system", "content": "Summarize the chat in one line."}]
            _, headers = await front.complete(asked, stream=False)
            assert headers["x-changji-recorded"] == "false"
            quiet += 1
        if turn == 120:  # an edit three turns back: a branch from there, holding what follows
            front.chat[-6] = {"role": "user", "content": "Turn 118, asked again: what do you see?"}
            front.chat.pop()
            await front.send(None, stream=True)
            edits += 1
        if turn == 150:  # a continue of the last reply
            continued, headers = await front.complete(front.messages(), stream=True)
            front.chat[-1]["content"] += continued
            continues += 1
    path = await path_texts(front.api, story)
    expected = [("greeting", GREETING)] + [
        ("user" if m["role"] == "user" else "reply", m["content"]) for m in front.chat
    ]
    assert path == expected  # the story's path is the front end's chat, message for message
    tree = await front.api.call("GET", f"/v1/stories/{story}/tree?limit=5000")
    texts = [(n["kind"], n["parent_id"], n.get("preview") or n.get("text")) for n in tree["nodes"]]
    assert len(texts) == len(set(texts))  # nothing recorded twice
    # 200 turns, a sibling reply for each swipe, the branch (the edited words, the four messages after them,
    # its new reply), nothing for the quiet requests or the continue
    assert len(tree["nodes"]) == 1 + 400 + swipes + 6
    sent = fake.requests[-1]["messages"]
    assert len(front.messages()) > 400 and len(sent) < 80 and sent[0] == {"role": "system", "content": SYSTEM}
    context = await front.api.call("GET", f"/v1/stories/{story}/context")
    assert {"digest", "episode"} & {b["what"] for b in context["explain"]}
    assert (swipes, edits, continues, quiet) == (7, 1, 1, 4)


async def test_a_swipe_back_to_an_earlier_reply_goes_on_from_it_without_a_copy(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("A1"), Text("A2"), Text("B1"))
    _, headers = await front.send("u1")
    front.chat.pop()
    await front.send(None)  # a swipe: A2 beside A1, and the leaf on A2
    front.chat[-1] = {"role": "assistant", "content": "A1"}  # the user swipes back to A1 and goes on
    await front.send("u2")
    story = headers["x-changji-story"]
    tree = (await front.api.call("GET", f"/v1/stories/{story}/tree"))["nodes"]
    assert sorted(n["kind"] for n in tree) == ["greeting", "reply", "reply", "reply", "user", "user"]
    assert await path_texts(front.api, story) == [("greeting", GREETING), ("user", "u1"), ("reply", "A1"),
                                                  ("user", "u2"), ("reply", "B1")]  # fmt: skip


async def test_a_prefill_is_the_start_of_the_reply_and_instructions_after_the_users_words_are_sent_on(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("'Aye,'"), Text(" she said."))
    _, headers = await front.send("u1")
    prefilled = [*front.messages(), {"role": "user", "content": "u2"}, {"role": "assistant", "content": "Well,"}]
    text, headers = await front.complete(prefilled, stream=False)
    reply = await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}")
    assert reply["text"] == "Well, she said." and text == " she said."
    fake.script(Text("'Fine.'"))
    ruled = [*front.messages(), {"role": "user", "content": "u3"}, {"role": "system", "content": "[Stay terse.]"}]
    _, headers = await front.complete(ruled, stream=True)
    assert headers["x-changji-recorded"] == "true"  # post-history instructions: still the user's turn
    assert fake.requests[-1]["messages"][-1] == {"role": "system", "content": "[Stay terse.]"}


async def test_an_edit_of_the_first_reply_branches_though_the_rest_of_the_chat_repeats_the_leaf(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3", "u4")
    fake.script(Text("r5"))
    front.chat[1] = {"role": "assistant", "content": "r1, edited"}
    await front.send("u5")
    path = await path_texts(front.api, story)
    assert path[2] == ("reply", "r1, edited") and path[-2:] == [("user", "u5"), ("reply", "r5")]
    assert "r1, edited" in [m["content"] for m in fake.requests[-1]["messages"]]


async def test_a_chat_from_its_greeting_with_its_first_reply_deleted_branches_from_the_greeting(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3")
    del front.chat[1]  # r1 deleted: u1 and u2 meet
    fake.script(Text("r4"))
    _, headers = await front.send("u4")
    assert headers["x-changji-story"] == story and headers["x-changji-recorded"] == "true"
    path = await path_texts(front.api, story)
    assert path == [
        ("greeting", GREETING), ("user", "u1\n\nu2"), ("reply", "r2"), ("user", "u3"), ("reply", "r3"),
        ("user", "u4"), ("reply", "r4"),
    ]  # fmt: skip


async def test_the_same_words_sent_twice_at_once_make_one_user_node_with_two_replies(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1")
    fake.script(Text("first"), Text("second"))
    messages = [*front.messages(), {"role": "user", "content": "u2"}]
    both = await asyncio.gather(front.complete(messages, False), front.complete(messages, False))
    assert {headers["x-changji-story"] for _, headers in both} == {story}
    replies = [await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}") for _, headers in both]
    assert replies[0]["id"] != replies[1]["id"] and replies[0]["parent_id"] == replies[1]["parent_id"]
    siblings = await front.api.call("GET", f"/v1/nodes/{replies[0]['parent_id']}/siblings")
    assert [n["text"] for n in siblings["nodes"]] == ["u2"]  # one user node for the words, not two
