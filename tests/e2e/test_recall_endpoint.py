"""Recall with an OpenAI-compatible embeddings endpoint (`CHANGJI_EMBED_*`), the fake model server on
loopback standing in for it: passages and queries are embedded there with their prefixes, the query
before the context is assembled, and an endpoint that fails leaves recall by words alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from api.app import SERVICE
from api.settings import ModelSettings, Settings
from providers.fake_server import FakeModelServer
from tests.builders import MakeClient, api_for
from tests.e2e.chat_import_support import GREETINGS, header, imported, jsonl, keeper, message
from tests.integration.recall_support import TIGHT

pytestmark = pytest.mark.both_stores

FILLER = (
    "今天也在修灯塔的窗户，玻璃上全是盐霜，擦了一遍又一遍还是看不清外面的海。",
    "“窗框又松了，风一吹就响，明天得找几颗新钉子来。”",
)


def embeddings(fake: FakeModelServer) -> ModelSettings:
    return ModelSettings(base_url=fake.url, model="fake-embed", max_retries=0)


def inputs(fake: FakeModelServer) -> list[str]:
    return [text for body in fake.embedding_requests for text in body["input"]]


async def test_the_endpoint_embeds_passages_and_queries_with_their_prefixes(
    make_client: MakeClient, fake: FakeModelServer
) -> None:
    client = await make_client(
        embeddings=embeddings(fake), embed_dimensions=32, embed_query_prefix="query: ", embed_passage_prefix="passage: "
    )
    api = api_for(client, "tenant-a")
    sid = (await api.story(**TIGHT))["id"]
    _, reply = await api.turn(sid, "地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
    for _ in range(20):
        await api.turn(sid, *FILLER)
    found: dict[str, Any] = await api.call("GET", f"/v1/stories/{sid}/recall?q=银币宝藏&k=3")
    assert found["hits"][0]["node_id"] == reply and set(found["hits"][0]["found_by"]) == {
        "bm25",
        "bm25_context",
        "dense",
    }
    index = await api.call("GET", f"/v1/stories/{sid}/index")
    assert index["embedder"] == "fake-embed" and index["passages"] - index["summary_passages"] == 21
    assert {body["dimensions"] for body in fake.embedding_requests} == {32}
    assert {body["model"] for body in fake.embedding_requests} == {"fake-embed"}
    sent = inputs(fake)
    assert "query: 银币宝藏" in sent
    assert any(text.startswith("passage: ") and "银币" in text for text in sent)

    await api.append(sid, "user", "那箱银币现在在哪里？")
    context = await api.call("GET", f"/v1/stories/{sid}/context")
    assert reply in next(b for b in context["explain"] if b["what"] == "recall")["node_ids"]
    assert "query: 那箱银币现在在哪里？" in inputs(fake)
    asked = len(fake.embedding_requests)
    await api.call("GET", f"/v1/stories/{sid}/context")  # the same words again: their vector is kept
    assert len(fake.embedding_requests) == asked


async def test_a_failing_endpoint_leaves_recall_by_words_and_its_vectors_come_back(
    make_client: MakeClient, fake: FakeModelServer
) -> None:
    client = await make_client(embeddings=embeddings(fake))
    api = api_for(client, "tenant-a")
    recall = client.app[SERVICE].recall
    recall.retry_seconds = 0.0
    sid = (await api.story(**TIGHT))["id"]
    fake.embeddings_status = 503
    _, reply = await api.turn(sid, "地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
    for _ in range(20):
        await api.turn(sid, *FILLER)
    found: dict[str, Any] = await api.call("GET", f"/v1/stories/{sid}/recall?q=银币宝藏&k=3")
    assert found["hits"][0]["node_id"] == reply and set(found["hits"][0]["found_by"]) == {"bm25", "bm25_context"}
    assert (await api.call("GET", f"/v1/stories/{sid}/index"))["dense"] is False
    await api.append(sid, "user", "银币呢？")
    context = await api.call("GET", f"/v1/stories/{sid}/context")  # a context all the same, by words
    assert reply in next(b for b in context["explain"] if b["what"] == "recall")["node_ids"]

    fake.embeddings_status = None  # the endpoint is back: a build after it embeds what it could not
    for _ in range(50):  # (a build begun while it failed may still finish without vectors)
        found = await api.call("GET", f"/v1/stories/{sid}/recall?q=宝藏银币&k=3")
        if (await api.call("GET", f"/v1/stories/{sid}/index"))["dense"]:
            break
        await asyncio.sleep(0.1)
    found = await api.call("GET", f"/v1/stories/{sid}/recall?q=宝藏银币&k=3")
    assert found["hits"][0]["node_id"] == reply and set(found["hits"][0]["found_by"]) == {
        "bm25",
        "bm25_context",
        "dense",
    }


def test_the_endpoint_embedder_needs_an_endpoint() -> None:
    with pytest.raises(ValueError, match="CHANGJI_EMBED_BASE_URL"):
        Settings(embedder="endpoint")


async def test_a_long_backlog_is_recalled_by_words_at_once_and_its_vectors_join_a_share_at_a_time(
    make_client: MakeClient, fake: FakeModelServer
) -> None:
    client = await make_client(embeddings=embeddings(fake))
    api = api_for(client, "tenant-a")
    client.app[SERVICE].recall.embed_chunk = 16  # (a request to the endpoint per share)
    fake.embeddings_delay = 0.2  # a slow embedder: the 300 imported turns take some 4 s
    card = await keeper(api)
    await api.call("PATCH", f"/v1/cards/{card['id']}", {"settings": TIGHT})
    rows = [header(), message(GREETINGS[0], 0, user=False)]
    rows += [message("地下室里有什么？", 1, user=True), message("“一箱旧银币，是守塔人的宝藏。”", 2, user=False)]
    for i in range(300):
        rows += [
            message(f"第{i}次问：窗户修好了吗？", 3 + 2 * i, user=True),
            message(FILLER[i % 2], 4 + 2 * i, user=False),
        ]
    sid = (await imported(api, card["id"], jsonl(*rows)))["story"]["id"]
    path = (await api.call("GET", f"/v1/stories/{sid}/path?limit=10000"))["nodes"]
    (reply,) = [n["id"] for n in path if n["kind"] == "reply" and "银币" in n["text"]]
    await api.append(sid, "user", "那箱银币现在在哪里？")
    deadline = asyncio.get_running_loop().time() + 20
    while True:  # the story's first index: by words, before any vector is made
        context = await api.call("GET", f"/v1/stories/{sid}/context")
        index = await api.call("GET", f"/v1/stories/{sid}/index")
        if index["passages"] and any(b["what"] == "recall" for b in context["explain"]):
            break
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    recall = next(b for b in context["explain"] if b["what"] == "recall")
    assert reply in recall["node_ids"] and "dense" not in recall["why"], recall
    assert index["dense_passages"] < index["passages"] and not index["dense"]  # (vectors join once all are made)

    await api.call("GET", f"/v1/stories/{sid}/recall?q=银币&k=1")  # (waits for every vector)
    index = await api.call("GET", f"/v1/stories/{sid}/index")
    assert index["dense"] and index["dense_passages"] == index["passages"]
    context = await api.call("GET", f"/v1/stories/{sid}/context")
    recall = next(b for b in context["explain"] if b["what"] == "recall")
    assert reply in recall["node_ids"] and "dense" in recall["why"]
    assert max(len(body["input"]) for body in fake.embedding_requests) <= 16  # (a share a build, not all at once)


async def test_a_recalled_turn_said_on_another_day_carries_its_date(make_client: MakeClient) -> None:
    api = api_for(await make_client(embedder="none"), "tenant-a")
    card = await keeper(api)
    await api.call("PATCH", f"/v1/cards/{card['id']}", {"settings": TIGHT})
    rows = [header(), message(GREETINGS[0], 0, user=False)]
    rows += [message("地下室里有什么？", 1, user=True), message("“一箱旧银币，是守塔人的宝藏。”", 2, user=False)]
    for i in range(30):  # the next day
        rows += [
            message(f"第{i}次问：窗户修好了吗？", 1500 + i, user=True),
            message(FILLER[i % 2], 1500 + i, user=False),
        ]
    sid = (await imported(api, card["id"], jsonl(*rows)))["story"]["id"]
    await api.call("GET", f"/v1/stories/{sid}/recall?q=银币&k=1")  # (the index, built)
    await api.append(sid, "user", "那箱银币现在在哪里？")  # (said today)
    context = await api.call("GET", f"/v1/stories/{sid}/context")
    recall = next(b for b in context["explain"] if b["what"] == "recall")
    last = context["messages"][-1]["content"]
    shown = last[recall["span"][0] : recall["span"][1]]
    today = datetime.now(UTC).date().isoformat()
    assert "（2024-12-01）" in shown and f"（本轮在{today}）" in shown.split("\n")[0], shown
    assert "旧银币" in shown and len(shown) == recall["chars"]
