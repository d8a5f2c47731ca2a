"""Saves and world lines over HTTP: 主线, a fork after going back, restore, rename, delete."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def save(api: Api, story_id: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = await api.call("POST", f"/v1/stories/{story_id}/saves", {"name": name}, 201)
    return data


async def forked(api: Api, story_id: str) -> dict[str, dict[str, Any]]:
    """Save A after turn 1, B after turn 2, then go back to A's node, branch, and save C."""
    _, r1 = await api.turn(story_id, "第一问。", "第一答。")
    a = await save(api, story_id, "A")
    await api.turn(story_id, "第二问。", "第二答。")
    b = await save(api, story_id, "B")
    await api.call("POST", f"/v1/stories/{story_id}/checkout", {"node_id": r1})
    await api.turn(story_id, "另一个第二问。", "另一个第二答。")
    c = await save(api, story_id, "C")
    return {"A": a, "B": b, "C": c}


def lines(saves: dict[str, Any]) -> list[tuple[str, list[str], list[bool]]]:
    return [
        (line["name"], [s["name"] for s in line["saves"]], [s["on_current_path"] for s in line["saves"]])
        for line in saves["worldlines"]
    ]


async def test_saves_are_grouped_into_a_main_line_and_a_fork(api: Api, story: dict[str, Any]) -> None:
    made = await forked(api, story["id"])
    saves = await api.call("GET", f"/v1/stories/{story['id']}/saves")
    assert [s["worldline_name"] for s in made.values()] == ["主线", "主线", "从「A」分出 · 线2"]
    assert lines(saves) == [("主线", ["A", "B"], [True, False]), ("从「A」分出 · 线2", ["C"], [True])]
    assert saves["current_save_id"] == made["C"]["id"]


async def test_restore_moves_the_leaf_back_to_the_save(api: Api, story: dict[str, Any]) -> None:
    made = await forked(api, story["id"])
    saves = await api.call("POST", f"/v1/stories/{story['id']}/saves/{made['B']['id']}/restore")
    current = await api.call("GET", f"/v1/stories/{story['id']}")
    assert current["leaf_id"] == made["B"]["node_id"] and saves["current_save_id"] == made["B"]["id"]


async def test_renamed_world_line_keeps_its_saves(api: Api, story: dict[str, Any]) -> None:
    made = await forked(api, story["id"])
    path = f"/v1/stories/{story['id']}/worldlines/{made['C']['worldline_id']}"
    saves = await api.call("PATCH", path, {"name": "船票线"})
    assert lines(saves)[1] == ("船票线", ["C"], [True])


async def test_deleted_save_leaves_the_list_and_the_tree(api: Api, story: dict[str, Any]) -> None:
    made = await forked(api, story["id"])
    await api.call("DELETE", f"/v1/stories/{story['id']}/saves/{made['B']['id']}", status=204)
    saves = await api.call("GET", f"/v1/stories/{story['id']}/saves")
    tree = await api.call("GET", f"/v1/stories/{story['id']}/tree")
    assert [name for line in lines(saves) for name in line[1]] == ["A", "C"]
    assert made["B"]["node_id"] in [n["id"] for n in tree["nodes"]]
