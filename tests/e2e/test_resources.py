"""Resource basics: pagination with cursors, stale versions on every If-Match route, deletes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api


async def test_card_list_pages_with_a_cursor(api: Api) -> None:
    made = [(await api.card(name=f"卡{i}"))["id"] for i in range(3)]
    first = await api.call("GET", "/v1/cards?limit=2")
    rest = await api.call("GET", f"/v1/cards?limit=2&cursor={first['next_cursor']}")
    assert [c["id"] for c in first["items"] + rest["items"]] == made
    assert rest["next_cursor"] is None


async def test_tree_pages_with_a_cursor(api: Api, story: dict[str, Any]) -> None:
    await api.turn(story["id"], "问。", "答。")
    first = await api.call("GET", f"/v1/stories/{story['id']}/tree?limit=2")
    rest = await api.call("GET", f"/v1/stories/{story['id']}/tree?limit=2&cursor={first['next_cursor']}")
    assert [n["kind"] for n in first["nodes"] + rest["nodes"]] == ["greeting", "user", "reply"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": "迟到"}),
        ("POST", "/v1/stories/{story}/checkout", {"node_id": "{root}"}),
        ("PATCH", "/v1/cards/{card}", {"card": {"name": "迟到的改名"}}),
    ],
)
async def test_if_match_route_refuses_a_stale_version_with_409(
    api: Api, story: dict[str, Any], method: str, path: str, body: dict[str, Any]
) -> None:
    ids = {"story": story["id"], "root": story["root_id"], "card": story["card_id"]}
    await api.call("PATCH", f"/v1/cards/{story['card_id']}", {"card": {"name": "改名"}})
    await api.append(story["id"], "user", "先到。")
    filled = {k: v.format(**ids) if isinstance(v, str) else v for k, v in body.items()}
    await api.call(method, path.format(**ids), filled, 409, {"If-Match": '"1"'})


async def test_malformed_if_match_is_400(api: Api, story: dict[str, Any]) -> None:
    body = {"kind": "user", "text": "你好"}
    await api.call("POST", f"/v1/stories/{story['id']}/nodes", body, 400, {"If-Match": "yesterday"})


async def test_deleted_story_is_404_and_leaves_the_list(api: Api, story: dict[str, Any]) -> None:
    user, _ = await api.turn(story["id"], "问。", "答。")
    await api.call("DELETE", f"/v1/stories/{story['id']}", status=204)
    await api.call("GET", f"/v1/stories/{story['id']}", status=404)
    await api.call("GET", f"/v1/nodes/{user}", status=404)
    assert (await api.call("GET", "/v1/stories"))["items"] == []


async def test_deleted_card_keeps_its_stories_readable(api: Api, story: dict[str, Any]) -> None:
    await api.call("DELETE", f"/v1/cards/{story['card_id']}", status=204)
    await api.call("GET", f"/v1/cards/{story['card_id']}", status=404)
    await api.call("POST", "/v1/stories", {"card_id": story["card_id"]}, 404)
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert context["messages"][1]["role"] == "assistant"


async def test_card_keeps_unknown_fields_and_extensions_verbatim(api: Api) -> None:
    extensions = {"depth_prompt": {"depth": 4, "prompt": "记住灯塔。"}, "talkativeness": "0.5"}
    card = await api.card(extensions=extensions, character_book={"entries": [{"keys": ["船票"]}]})
    fetched = await api.call("GET", f"/v1/cards/{card['id']}")
    assert fetched["card"]["extensions"] == extensions
    assert fetched["card"]["character_book"] == {"entries": [{"keys": ["船票"]}]}


async def test_story_settings_override_the_cards_when_the_context_is_assembled(api: Api) -> None:
    story = await api.story(context_window=1024, reply_reserve=0, user_name="林舟")
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert context["budget"] == 1024
    assert "林舟" in context["messages"][1]["content"]


async def test_alternate_greeting_becomes_the_root(api: Api) -> None:
    card = await api.card()
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"], "greeting_index": 1}, 201)
    root = await api.call("GET", f"/v1/nodes/{story['root_id']}")
    assert root["text"] == "清晨的雾还没散。"
