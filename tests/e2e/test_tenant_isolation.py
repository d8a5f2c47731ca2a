"""Tenant isolation: another tenant's ids are 404 everywhere, and lists never show them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


@pytest.fixture
async def owned(api: Api) -> dict[str, str]:
    """Tenant A's card, story, a user node, a reply and a save."""
    story = await api.story()
    user, reply = await api.turn(story["id"], "秘密：船票在二楼。", "沈砚沉默了。")
    save = await api.call("POST", f"/v1/stories/{story['id']}/saves", {"name": "风暴夜"}, 201)
    return {"card": story["card_id"], "story": story["id"], "user": user, "reply": reply, "save": save["id"]}


FOREIGN_REQUESTS = [
    ("GET", "/v1/cards/{card}", None),
    ("PATCH", "/v1/cards/{card}", {"card": {"name": "偷改"}}),
    ("DELETE", "/v1/cards/{card}", None),
    ("POST", "/v1/stories", {"card_id": "{card}"}),
    ("GET", "/v1/stories/{story}", None),
    ("PATCH", "/v1/stories/{story}", {"title": "偷改"}),
    ("DELETE", "/v1/stories/{story}", None),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": "闯入"}),
    ("POST", "/v1/stories/{story}/checkout", {"node_id": "{user}"}),
    ("GET", "/v1/stories/{story}/tree", None),
    ("GET", "/v1/stories/{story}/path", None),
    ("GET", "/v1/stories/{story}/context", None),
    ("GET", "/v1/stories/{story}/search?q=船票", None),
    ("GET", "/v1/stories/{story}/replay", None),
    ("POST", "/v1/stories/{story}/hide", {"node_ids": ["{user}"]}),
    ("GET", "/v1/stories/{story}/saves", None),
    ("POST", "/v1/stories/{story}/saves", {"name": "偷存"}),
    ("POST", "/v1/stories/{story}/saves/{save}/restore", None),
    ("DELETE", "/v1/stories/{story}/saves/{save}", None),
    ("GET", "/v1/nodes/{user}", None),
    ("GET", "/v1/nodes/{user}/children", None),
    ("GET", "/v1/nodes/{reply}/siblings", None),
    ("POST", "/v1/nodes/{reply}/star", None),
    ("POST", "/v1/nodes/{user}/hide", None),
    ("POST", "/v1/nodes/{reply}/revise", {"text": "偷改"}),
]


def filled(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, list):
        return [filled(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, ids) for k, v in value.items()}
    return value


@pytest.mark.parametrize(("method", "path", "body"), FOREIGN_REQUESTS, ids=[f"{m} {p}" for m, p, _ in FOREIGN_REQUESTS])
async def test_other_tenant_gets_404_for_anothers_ids(
    other: Api, owned: dict[str, str], method: str, path: str, body: Any
) -> None:
    await other.call(method, filled(path, owned), filled(body, owned), status=404)


async def test_other_tenant_cannot_graft_anothers_nodes_into_its_own_story(other: Api, owned: dict[str, str]) -> None:
    mine = (await other.story())["id"]
    await other.call(
        "POST", f"/v1/stories/{mine}/nodes", {"kind": "reply", "text": "嫁接", "parent_id": owned["user"]}, 404
    )
    await other.call("POST", f"/v1/stories/{mine}/checkout", {"node_id": owned["reply"]}, 404)
    await other.call("POST", f"/v1/stories/{mine}/hide", {"node_ids": [owned["user"]]}, 404)


async def test_owners_story_is_untouched_when_another_tenant_tries_everything(
    api: Api, other: Api, owned: dict[str, str]
) -> None:
    before = await api.call("GET", f"/v1/stories/{owned['story']}/tree")
    for method, path, body in FOREIGN_REQUESTS:
        await other.call(method, filled(path, owned), filled(body, owned), status=404)
    assert await api.call("GET", f"/v1/stories/{owned['story']}/tree") == before
    await api.call("GET", f"/v1/cards/{owned['card']}")


async def test_lists_show_only_the_callers_items(api: Api, other: Api, owned: dict[str, str]) -> None:
    theirs = await other.story()
    cards = [c["id"] for c in (await other.call("GET", "/v1/cards"))["items"]]
    stories = [s["id"] for s in (await other.call("GET", "/v1/stories"))["items"]]
    assert (cards, stories) == ([theirs["card_id"]], [theirs["id"]])
    assert [s["id"] for s in (await api.call("GET", "/v1/stories"))["items"]] == [owned["story"]]
