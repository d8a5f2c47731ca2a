"""The tree's answer, encoded straight from the read model's rows, is what its schema (`TreeResponse`)
says, byte for byte as the model would encode it."""

from __future__ import annotations

import json

import pytest

from api.handlers.stories import tree_node
from api.schemas.nodes import TreeNode, TreeResponse
from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def test_the_tree_answer_is_what_its_model_encodes(api: Api) -> None:
    story = await api.story()
    user, reply = await api.turn(story["id"], "你好。", "嗯。" * 200)
    await api.call("POST", f"/v1/nodes/{user}/hide")
    await api.call("POST", f"/v1/nodes/{reply}/star")
    first = await api.call("GET", f"/v1/stories/{story['id']}/tree?limit=2")
    rest = await api.call("GET", f"/v1/stories/{story['id']}/tree?limit=2&cursor={first['next_cursor']}")
    for page in (first, rest):
        assert json.loads(TreeResponse.model_validate(page).model_dump_json()) == page
    nodes = {n["id"]: n for n in first["nodes"] + rest["nodes"]}
    assert nodes[user]["hidden"] is True and nodes[reply]["starred"] is True and nodes[reply]["hidden"] is False
    assert rest["next_cursor"] is None and len(nodes) == 3


@pytest.mark.parametrize("created", ["2026-12-05T13:18:01+00:00", "2026-12-05T13:18:01.000250+00:00"])
def test_a_node_row_encodes_as_its_model_does(created: str) -> None:
    row = {
        "id": "0b6c7b4e-8a47-4b8e-9d2b-0e0a0c3f6a11", "parent_id": None, "kind": "greeting", "phase": "final",
        "depth": 0, "turn": 0, "hidden": 0, "starred": 1, "revisions": 2, "chars": 5, "preview": None,
        "created_at": created, "seq": 7, "story_id": "x", "scene_at": None, "link": None,
    }  # fmt: skip
    shown = tree_node(row)
    assert json.loads(TreeNode.model_validate({**row, "preview": ""}).model_dump_json()) == shown
