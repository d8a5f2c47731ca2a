"""The OpenAI-compatible chat client against the fake model server on loopback: streaming, tool calls,
usage, retries, timeouts, broken streams, and keys kept out of logs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from api.settings import ModelSettings, Settings
from domain.ports import ModelCallError
from providers.fake_server import Drop, FakeModelServer, Malformed, Status, Text, ToolCalls
from providers.openai import OpenAIChat, OpenAIEmbeddings
from tests.fake_model import endpoint

SECRET = "sk-test-0123456789-very-secret"
HELLO = [{"role": "user", "content": "你好"}]


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture
async def make_chat(fake: FakeModelServer) -> AsyncIterator[Any]:
    clients: list[OpenAIChat] = []

    def make(**overrides: Any) -> OpenAIChat:
        client = OpenAIChat(endpoint(fake, **overrides))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
def chat(make_chat: Any) -> OpenAIChat:
    chat: OpenAIChat = make_chat()
    return chat


async def test_chat_streams_text_deltas_in_order(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(Text(["雾", "从海面", "升起。"]))
    deltas: list[str] = []
    result = await chat.chat(HELLO, on_text=deltas.append)
    assert deltas == ["雾", "从海面", "升起。"]
    assert result.text == "雾从海面升起。"
    assert result.tool_calls == ()
    assert result.finish_reason == "stop"
    assert result.model == "fake-main"


async def test_chat_sends_a_streaming_request_with_the_tools_and_messages(
    fake: FakeModelServer, chat: OpenAIChat
) -> None:
    tools = [{"type": "function", "function": {"name": "draft_read", "parameters": {"type": "object"}}}]
    fake.script(Text("好。"), Text("好。"))
    await chat.chat(HELLO, tools=tools, max_tokens=64)
    await chat.chat(HELLO)
    with_tools, without = fake.requests
    assert with_tools["stream"] is True and with_tools["stream_options"] == {"include_usage": True}
    assert (with_tools["model"], with_tools["messages"], with_tools["tools"]) == ("fake-main", HELLO, tools)
    assert with_tools["max_tokens"] == 64
    assert "tools" not in without and "max_tokens" not in without


async def test_chat_assembles_tool_call_arguments_from_fragments(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(
        ToolCalls(
            ("draft_write", {"version": 0, "content": "灯塔的灯灭了。"}), ("draft_seal", {"version": 1}), text="先写。"
        )
    )
    result = await chat.chat(HELLO)
    assert result.text == "先写。"
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_0", "draft_write"), ("call_1", "draft_seal")]
    assert result.tool_calls[0].arguments == '{"version": 0, "content": "灯塔的灯灭了。"}'
    assert result.tool_calls[1].arguments == '{"version": 1}'
    assert result.finish_reason == "tool_calls"


async def test_chat_passes_malformed_tool_arguments_through_untouched(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(ToolCalls(("draft_write", '{"version": 0, "content": ')))
    result = await chat.chat(HELLO)
    assert result.tool_calls[0].arguments == '{"version": 0, "content": '


async def test_chat_captures_usage(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(Text("好。", prompt_tokens=321, completion_tokens=17))
    result = await chat.chat(HELLO)
    assert (result.prompt_tokens, result.completion_tokens) == (321, 17)


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_chat_retries_a_retryable_status_then_succeeds(
    fake: FakeModelServer, chat: OpenAIChat, status: int
) -> None:
    fake.script(Status(status=status), Status(status=status, retry_after=0), Text("好。"))
    result = await chat.chat(HELLO)
    assert result.text == "好。"
    assert len(fake.requests) == 3


async def test_chat_honours_retry_after(fake: FakeModelServer, make_chat: Any) -> None:
    chat = make_chat(backoff=5.0, backoff_cap=5.0)  # without Retry-After the wait could be seconds
    fake.script(Status(status=429, retry_after=0), Status(status=429, retry_after=0), Text("好。"))
    result = await chat.chat(HELLO)
    assert result.text == "好。"


async def test_chat_gives_up_after_max_retries_with_the_last_status(fake: FakeModelServer, make_chat: Any) -> None:
    chat = make_chat(max_retries=1)
    fake.script(Status(status=500), Status(status=503), Text("太迟了。"))
    with pytest.raises(ModelCallError) as failed:
        await chat.chat(HELLO)
    assert failed.value.outcome == "http 503"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_chat_does_not_retry_a_client_error(fake: FakeModelServer, chat: OpenAIChat, status: int) -> None:
    fake.script(Status(status=status), Text("不该被请求。"))
    with pytest.raises(ModelCallError) as failed:
        await chat.chat(HELLO)
    assert failed.value.outcome == f"http {status}"
    assert f"scripted {status}" in str(failed.value)
    assert len(fake.requests) == 1


async def test_chat_retries_a_connection_dropped_before_any_text(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(Drop(), Text(["重", "来。"]))
    deltas: list[str] = []
    result = await chat.chat(HELLO, on_text=deltas.append)
    assert result.text == "重来。"
    assert deltas == ["重", "来。"]
    assert len(fake.requests) == 2


async def test_chat_does_not_retry_a_connection_dropped_after_text(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(Drop(["说到", "一半"]), Text("不该被请求。"))
    deltas: list[str] = []
    with pytest.raises(ModelCallError) as failed:
        await chat.chat(HELLO, on_text=deltas.append)
    assert failed.value.outcome == "interrupted"
    assert deltas == ["说到", "一半"]
    assert len(fake.requests) == 1


async def test_chat_refuses_a_malformed_stream(fake: FakeModelServer, chat: OpenAIChat) -> None:
    fake.script(Malformed(), Text("不该被请求。"))
    with pytest.raises(ModelCallError) as failed:
        await chat.chat(HELLO)
    assert failed.value.outcome == "malformed"
    assert len(fake.requests) == 1


async def test_chat_retries_a_read_timeout_then_succeeds(fake: FakeModelServer, make_chat: Any) -> None:
    chat = make_chat(read_timeout=0.3, max_retries=1)
    fake.script(Text("太慢了。", delay=0.6), Text("赶上了。"))
    result = await chat.chat(HELLO)
    assert result.text == "赶上了。"
    assert len(fake.requests) == 2


async def test_chat_times_out_when_every_attempt_is_slow(fake: FakeModelServer, make_chat: Any) -> None:
    chat = make_chat(read_timeout=0.3, max_retries=1)
    fake.script(Text("慢。", delay=0.6), Text("还是慢。", delay=0.6), Text("不该被请求。"))
    with pytest.raises(ModelCallError) as failed:
        await chat.chat(HELLO)
    assert failed.value.outcome == "timeout"
    assert len(fake.requests) == 2


async def test_chat_timeout_after_text_is_an_interruption_not_a_retry(fake: FakeModelServer, make_chat: Any) -> None:
    chat = make_chat(read_timeout=0.3, max_retries=2)
    fake.script(Text(["开头。", "后来。"], chunk_delay=0.6), Text("不该被请求。"))
    deltas: list[str] = []
    with pytest.raises(ModelCallError) as failed:
        await chat.chat(HELLO, on_text=deltas.append)
    assert failed.value.outcome == "interrupted"
    assert deltas == ["开头。"]
    assert len(fake.requests) == 1


async def test_chat_to_a_closed_port_fails_as_a_network_error() -> None:
    async with FakeModelServer() as gone:
        pass
    chat = OpenAIChat(endpoint(gone, max_retries=1, connect_timeout=0.5))
    try:
        with pytest.raises(ModelCallError) as failed:
            await chat.chat(HELLO)
    finally:
        await chat.close()
    assert failed.value.outcome == "network"


async def test_chat_keeps_to_its_concurrency_limit(fake: FakeModelServer, make_chat: Any) -> None:
    chat = make_chat(concurrency=1)
    fake.script(Text(["一", "二", "三"], chunk_delay=0.05), Text("后一个。"))
    requests_seen: list[int] = []
    first = asyncio.create_task(chat.chat(HELLO, on_text=lambda _: requests_seen.append(len(fake.requests))))
    second = asyncio.create_task(chat.chat(HELLO))
    results = await asyncio.gather(first, second)
    assert [r.text for r in results] == ["一二三", "后一个。"]
    assert requests_seen == [1, 1, 1]  # the second call waited for the first to finish


async def test_api_key_never_appears_in_repr_or_logs(
    fake: FakeModelServer, make_chat: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chat = make_chat(api_key=SECRET, max_retries=3)
    fake.script(Status(status=429, retry_after=0), Status(status=500, retry_after=0), Drop(), Text("好。"))
    with caplog.at_level(logging.DEBUG):
        result = await chat.chat(HELLO)
    assert result.text == "好。"
    assert len(caplog.records) >= 3  # every retry is logged …
    for record in caplog.records:  # … and none of them shows the key
        assert SECRET not in record.getMessage()
        assert SECRET not in repr(record.args)
    assert SECRET not in caplog.text
    assert SECRET not in repr(chat)
    assert SECRET not in repr(chat.endpoint)


def test_api_key_is_hidden_in_settings() -> None:
    settings = Settings(main_model=ModelSettings(base_url="http://x/v1", model="m", api_key=SECRET))
    assert SECRET not in repr(settings)
    assert SECRET not in settings.model_dump_json()
    assert settings.main_model.endpoint().api_key == SECRET


async def test_embeddings_return_one_vector_per_text_in_order(fake: FakeModelServer) -> None:
    embedder = OpenAIEmbeddings(endpoint(fake))
    try:
        vectors = await embedder.embed(["灯塔", "码头", "灯塔"])
        assert await embedder.embed([]) == []
    finally:
        await embedder.close()
    assert len(vectors) == 3
    assert vectors[0] == vectors[2] != vectors[1]


def test_a_tool_call_that_passed_nothing_on_leaves_the_stream_retriable() -> None:
    from providers.openai import _Stream

    fragment = {
        "choices": [
            {"delta": {"tool_calls": [{"index": 0, "function": {"name": "memory_search", "arguments": '{"q'}}]}}
        ]
    }
    quiet = _Stream(None, lambda index, name, text: False)  # nothing reached the user: a retry repeats nothing
    quiet.take(fragment)
    assert not quiet.delivered
    shown = _Stream(None, lambda index, name, text: True)  # words went out: never streamed twice
    shown.take(fragment)
    assert shown.delivered
