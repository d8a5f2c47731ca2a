"""A card merged into another: its stories read that card from the next context on (its name, its
description, its settings), their costs are counted there, and another tenant can neither merge into it
nor see it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


def system_text(context: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in context["messages"] if m["role"] == "system")


async def test_a_story_reads_the_card_it_was_moved_to_from_its_next_context(api: Api) -> None:
    first = await api.card(name="Mira", description="Mira keeps the lighthouse on the northern cape.")
    story = await api.story(first["id"])
    await api.turn(story["id"], "Is the lamp lit?", "It is lit, every night.")
    before = await api.call("GET", f"/v1/stories/{story['id']}/context")  # (and cached by the service)
    assert "northern cape" in system_text(before)
    second = await api.card(name="Mirabel", description="Mirabel rows the ferry across the southern sound.")
    merged = await api.call("POST", f"/v1/cards/{first['id']}/merge", {"into": second["id"]})
    assert merged["stories_moved"] == 1
    after = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert "southern sound" in system_text(after) and "northern cape" not in system_text(after)
    listed = (await api.call("GET", f"/v1/stories?card_id={second['id']}"))["items"]
    assert [s["id"] for s in listed] == [story["id"]]
    await api.call("GET", f"/v1/cards/{first['id']}/costs", status=404)
    await api.call("GET", f"/v1/cards/{second['id']}/costs")


async def test_a_deleted_story_moves_too_and_comes_back_on_the_card_it_moved_to(api: Api) -> None:
    first, second = await api.card(name="Mira"), await api.card(name="Mirabel")
    story = await api.story(first["id"])
    await api.call("DELETE", f"/v1/stories/{story['id']}", status=204)
    merged = await api.call("POST", f"/v1/cards/{first['id']}/merge", {"into": second["id"]})
    assert merged["stories_moved"] == 1
    await api.call("POST", f"/v1/stories/{story['id']}/restore")
    assert (await api.call("GET", f"/v1/stories/{story['id']}"))["card_id"] == second["id"]


async def test_another_tenants_card_is_not_merged_into_nor_merged(api: Api, other: Api) -> None:
    mine, theirs = await api.card(name="Mira"), await other.card(name="Mira")
    refused = await api.call("POST", f"/v1/cards/{mine['id']}/merge", {"into": theirs["id"]}, status=404)
    assert refused["errors"][0]["field"] == "body.into"
    await other.call("POST", f"/v1/cards/{mine['id']}/merge", {"into": theirs["id"]}, status=404)
    assert (await api.call("GET", f"/v1/cards/{mine['id']}"))["id"] == mine["id"]
