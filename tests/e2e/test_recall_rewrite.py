"""The side model's search of the memory (`recall_rewrite`), end to end: the words that share nothing
with an old turn find it by the search the side model wrote, noted on the user's node with its call in
the cost ledger; every later read at that node ranks the same search without asking again; off, the
search is not used; a side model too slow leaves the turn to the words alone, its call kept."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Step, Text
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.e2e.proxy_front_end.front_end import Front
from tests.fake_model import MakeEngine
from tests.scene_support import FAST_JOBS, settled, side_model

pytestmark = pytest.mark.both_stores

SMALL = {"keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0, "fill_window": False}
HIDDEN = "青铜钥匙我藏在地窖第三个酒桶底下了，别告诉任何人。"
ASKED = "后来那个东西怎么处理的？"


def is_search(body: dict[str, Any]) -> bool:
    return "检索记忆" in body["messages"][0]["content"] or "search the memory" in body["messages"][0]["content"]


def searcher(line: str, delay: float = 0.0) -> Any:
    def answer(body: dict[str, Any]) -> Step:
        if is_search(body):
            return Text(line, delay=delay, prompt_tokens=180, completion_tokens=12)
        if "接力摘要" in body["messages"][0]["content"]:
            return Text("模型摘要：两人在灯塔里说了些闲话。")
        return Text("{}")

    return answer


@pytest.fixture
async def side() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


async def played(api: Api) -> dict[str, Any]:
    story = await api.story(**SMALL, recall_rewrite=True)
    await api.turn(story["id"], "钥匙收好了吗？", HIDDEN)
    for i in range(2, 9):
        await api.turn(story["id"], f"第{i}问：灯还亮着吗？", f"第{i}答：亮着，渡船第{i}天会来。")
    await settled(api, story["id"])
    return story


async def proxied(
    side: FakeModelServer,
    fake: FakeModelServer,
    make_engine: MakeEngine,
    settings: dict[str, Any],
    turns: int,
    reply: str,
    words: str,
) -> tuple[Front, str]:
    """A front end's chat through the proxy: the brass key hidden in its first turn, the card then set to
    `settings` with the search on, and turns 2 … `turns` − 1 of `words` and `reply` ({i}: the turn), settled;
    (the front end, the story)."""
    front = Front(await make_engine(embedder="none", side_model=side_model(side), **FAST_JOBS))
    fake.script(Text("Under the third barrel in the cellar, and tell no one."))
    _, headers = await front.send("Did you put the brass key somewhere safe?")
    story_id = headers["x-changji-story"]
    card = (await front.api.call("GET", f"/v1/stories/{story_id}"))["card_id"]
    await front.api.call("PATCH", f"/v1/cards/{card}", {"settings": {**settings, "recall_rewrite": True}})
    for i in range(2, turns):
        fake.script(Text(reply.format(i=i)))
        await front.send(words.format(i=i))
    await settled(front.api, story_id)
    return front, story_id


def recalled(context: dict[str, Any]) -> str:
    blocks = [b for b in context["explain"] if b["what"] == "recall"]
    return "".join(context["messages"][b["message_index"]]["content"][slice(*b["span"])] for b in blocks)


async def test_the_side_models_search_recalls_a_turn_the_words_share_nothing_with(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    side.fallback = searcher("青铜钥匙 地窖 酒桶 藏")  # type: ignore[assignment]
    api = api_for(await make_client(side_model=side_model(side), embedder="none", **FAST_JOBS), TENANT)
    story = await played(api)
    early = [r["messages"][1]["content"] for r in side.requests if is_search(r)]
    assert not any(e.endswith("【用户这句话】\n钥匙收好了吗？") for e in early)  # (only once the window is left)

    words = (await api.append(story["id"], "user", ASKED))["node"]
    assert words["search_terms"] == "青铜钥匙 地窖 酒桶 藏"
    asked = [r for r in side.requests if is_search(r)]
    assert len(asked) == len(early) + 1
    prompt = asked[-1]["messages"][1]["content"]
    assert prompt.startswith("【上一轮】\n第8问：灯还亮着吗？\n第8答") and prompt.endswith(f"【用户这句话】\n{ASKED}")
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert HIDDEN in recalled(context)
    block = next(b for b in context["explain"] if b["what"] == "recall")
    assert "search" in block["why"]
    again = await api.call("GET", f"/v1/stories/{story['id']}/context?at={words['id']}")
    assert recalled(again) == recalled(context) and len([r for r in side.requests if is_search(r)]) == len(asked)

    costs = await api.call("GET", f"/v1/stories/{story['id']}/costs")
    search = [line for line in costs["lines"] if line["purpose"] == "search"]
    assert len(search) == 1 and search[0]["calls"] == len(asked) and search[0]["prompt_tokens"] == 180 * len(asked)

    await api.call("PATCH", f"/v1/stories/{story['id']}", {"settings": {"recall_rewrite": False}})
    off = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert HIDDEN not in recalled(off)  # (the words alone share nothing with it)
    await api.append(story["id"], "reply", "她没说。")
    await api.append(story["id"], "user", "那钥匙呢？")
    assert len([r for r in side.requests if is_search(r)]) == len(asked)  # off: not asked


async def test_a_side_model_slower_than_the_wait_leaves_the_turn_to_the_words(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    side.fallback = searcher("青铜钥匙 地窖", delay=3.0)  # type: ignore[assignment]
    client = await make_client(side_model=side_model(side), embedder="none", recall_rewrite_seconds=0.3, **FAST_JOBS)
    api = api_for(client, TENANT)
    story = await played(api)
    started = time.perf_counter()
    words = (await api.append(story["id"], "user", ASKED))["node"]
    assert time.perf_counter() - started < 2.5 and words["search_terms"] == ""
    assert HIDDEN not in recalled(await api.call("GET", f"/v1/stories/{story['id']}/context"))
    costs = await api.call("GET", f"/v1/stories/{story['id']}/costs")
    search = [line for line in costs["lines"] if line["purpose"] == "search"]
    assert search and search[0]["calls"] >= 1 and search[0]["ok"] == 0  # (each timed out, each counted)


async def test_an_answer_that_is_no_search_is_refused_and_kept_in_the_ledger(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    side.fallback = searcher('{"patch": {}}')  # type: ignore[assignment]
    api = api_for(await make_client(side_model=side_model(side), embedder="none", **FAST_JOBS), TENANT)
    story = await played(api)
    words = (await api.append(story["id"], "user", ASKED))["node"]
    assert words["search_terms"] == ""
    node = await api.call("GET", f"/v1/nodes/{words['id']}")
    assert node["search_terms"] == ""
    costs = await api.call("GET", f"/v1/stories/{story['id']}/costs")
    search = [line for line in costs["lines"] if line["purpose"] == "search"]
    assert len(search) == 1 and search[0]["calls"] >= 1 and search[0]["ok"] == 0  # (each refused, each counted)


async def test_a_proxied_request_sends_upstream_what_the_search_recalls_and_notes_it_once_written(
    side: FakeModelServer, fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    side.fallback = searcher("brass key cellar barrel")  # type: ignore[assignment]
    front, story_id = await proxied(
        side, fake, make_engine, SMALL, 9, "Lit; the ferry comes on day {i}.", "Turn {i}: is the lamp lit?"
    )

    fake.script(Text("She never said."))
    await front.send("And what became of that thing afterwards?")
    asked = len([r for r in side.requests if is_search(r)])
    front.chat.pop()  # a swipe: the same words again, the words' search read from their node
    fake.script(Text("She hid it, I think."))
    await front.send()
    await front.client.close()
    assert len([r for r in side.requests if is_search(r)]) == asked
    told = fake.requests[-1]["messages"]
    memory, words = told[-1]["content"].split("\n\n")[-2:]  # (the chat's first turn is no longer in the window)
    assert memory.startswith("[Story memory]") and "Under the third barrel in the cellar" in memory
    assert words == "And what became of that thing afterwards?"
    asked = [r for r in side.requests if is_search(r)]
    assert asked[-1]["messages"][1]["content"].endswith("[THE USER'S WORDS]\nAnd what became of that thing afterwards?")
    path = (await front.api.call("GET", f"/v1/stories/{story_id}/path"))["nodes"]
    assert path[-2]["kind"] == "user" and path[-2]["search_terms"] == "brass key cellar barrel"


async def test_an_engine_turn_recalls_by_the_search_noted_before_its_context(
    side: FakeModelServer, fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    side.fallback = searcher("青铜钥匙 地窖 酒桶")  # type: ignore[assignment]
    engine = await make_engine(embedder="none", side_model=side_model(side), **FAST_JOBS)
    story = await engine.story(**SMALL, recall_rewrite=True)
    fake.script(Text(HIDDEN))
    await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": "钥匙收好了吗？"}, 201)
    fake.fallback = lambda body: Text("灯还亮着，渡船三天后到。")  # type: ignore[assignment]
    for i in range(2, 9):
        await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": f"第{i}问：灯还亮着吗？"}, 201)
    await settled(engine, story["id"])
    turn = await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": ASKED}, 201)
    sent = fake.requests[-1]["messages"]
    assert sent[-1]["content"].endswith(ASKED) and "【剧情记忆】" in sent[-1]["content"]
    assert HIDDEN in sent[-1]["content"].split("【剧情记忆】", 1)[1]
    user = await engine.call("GET", f"/v1/nodes/{turn['reply']['parent_id']}")
    assert user["search_terms"] == "青铜钥匙 地窖 酒桶"


async def test_a_proxied_request_that_edits_the_last_reply_and_adds_words_is_searched_from_the_edit(
    side: FakeModelServer, fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    side.fallback = searcher("brass key cellar barrel")  # type: ignore[assignment]
    front, story_id = await proxied(
        side, fake, make_engine, SMALL, 9, "Lit; the ferry comes on day {i}.", "Turn {i}: is the lamp lit?"
    )
    front.chat[-1] = {"role": "assistant", "content": "Lit, and the gulls are back."}  # (edited in the front end)
    fake.script(Text("She never said."))
    _, headers = await front.send("And what became of that thing afterwards?")
    await front.client.close()
    assert headers["x-changji-recorded"] == "true"
    asked = [r for r in side.requests if is_search(r)][-1]["messages"][1]["content"]
    assert "Lit, and the gulls are back." in asked  # (the edit, not saved before the upstream answered)
    assert "Under the third barrel in the cellar" in fake.requests[-1]["messages"][-1]["content"]
    path = (await front.api.call("GET", f"/v1/stories/{story_id}/path"))["nodes"]
    assert path[-2]["search_terms"] == "brass key cellar barrel" and path[-3]["text"] == "Lit, and the gulls are back."


async def test_a_summarized_story_whose_window_holds_it_all_is_not_searched(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    side.fallback = searcher("青铜钥匙 地窖")  # type: ignore[assignment]
    api = api_for(await make_client(side_model=side_model(side), embedder="none", **FAST_JOBS), TENANT)
    story = await api.story(**{**SMALL, "fill_window": True}, recall_rewrite=True)  # (the default 32k window)
    await api.turn(story["id"], "钥匙收好了吗？", HIDDEN)
    for i in range(2, 9):
        await api.turn(story["id"], f"第{i}问：灯还亮着吗？", f"第{i}答：亮着，渡船第{i}天会来。")
    await settled(api, story["id"])
    assert (await api.call("GET", f"/v1/stories/{story['id']}/summaries"))["episodes"]  # (summarized)
    words = (await api.append(story["id"], "user", ASKED))["node"]
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert any(m["content"] == HIDDEN for m in context["messages"])  # (word for word in the window)
    assert not [b for b in context["explain"] if b["what"] == "recall"]
    assert words["search_terms"] is None and not [r for r in side.requests if is_search(r)]  # (nothing to recall)


async def test_a_proxied_chat_cut_to_the_front_ends_budget_is_searched_before_any_summary(
    side: FakeModelServer, fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    side.fallback = searcher("brass key cellar barrel")  # type: ignore[assignment]
    front, story_id = await proxied(
        side, fake, make_engine, {"pack_turns": 0}, 12,
        "Lit; the ferry comes on day {i}, and the gulls are loud over the harbour again.",
        "Turn {i}: is the lamp lit, and is the harbour quiet tonight?",
    )  # fmt: skip
    assert not (await front.api.call("GET", f"/v1/stories/{story_id}/summaries"))["episodes"]
    front.chat = front.chat[-8:]  # (the front end sends only what fits its own context)
    fake.script(Text("She never said."))
    await front.send("And what became of that thing afterwards?")
    await front.client.close()
    asked = [r for r in side.requests if is_search(r)]
    assert asked and asked[-1]["messages"][1]["content"].endswith("And what became of that thing afterwards?")
    assert "Under the third barrel in the cellar" in fake.requests[-1]["messages"][-1]["content"]
