"""A SillyTavern `.jsonl` imported over HTTP becomes a story whose tree keeps the greeting's swipes, every
reply's swipes as siblings, hidden messages hidden and the dates; a multipart upload imports the chat it carries."""

from __future__ import annotations

import pytest

from tests.builders import Api
from tests.e2e.chat_import_support import (
    GREETINGS,
    NODES,
    PATH,
    R2_SWIPES,
    R6_SWIPES,
    SHORT,
    at,
    imported,
    keeper,
    moment,
    path_of,
    siblings_of,
    tree_of,
)

pytestmark = pytest.mark.both_stores


async def test_a_chat_imports_to_a_tree_with_its_swipes_hidden_messages_and_dates(api: Api) -> None:
    card = await keeper(api)
    answer = await imported(api, card["id"])
    story = answer["story"]
    assert (answer["steps"], answer["nodes"]) == (len(PATH), NODES)
    assert answer["skipped_lines"] == [] and answer["warnings"] == []
    assert story["card_id"] == card["id"]

    path = await path_of(api, story["id"])
    root, steps = path[0], path[1:]
    assert (root["kind"], root["text"], root["id"]) == ("greeting", GREETINGS[1], story["root_id"])
    assert [(n["kind"], n["text"], n["hidden"]) for n in steps] == [(k, t, h) for k, t, _, h in PATH]
    assert [moment(n["created_at"]) for n in steps] == [at(minute) for _, _, minute, _ in PATH]
    assert [n["depth"] for n in path] == list(range(len(PATH) + 1))
    assert story["leaf_id"] == steps[-1]["id"] and steps[-1]["text"] == R6_SWIPES[1]

    for place, swipes, chosen, first in ((3, R2_SWIPES, 2, 4), (13, R6_SWIPES, 1, 19)):
        on_path = steps[place]
        under = await siblings_of(api, on_path["id"])
        assert [n["text"] for n in under] == swipes  # in swipe order, under the same user node
        assert {n["parent_id"] for n in under} == {steps[place - 1]["id"]}
        assert under[chosen]["id"] == on_path["id"]
        assert [moment(n["created_at"]) for n in under] == [at(first + i) for i in range(len(swipes))]
        assert not any(n["hidden"] for n in under)

    tree = await tree_of(api, story["id"])
    assert len(tree) == NODES
    hidden = [n for n in tree if n["hidden"]]
    assert [n["id"] for n in hidden] == [steps[8]["id"], steps[9]["id"]]
    alone = await siblings_of(api, steps[1]["id"])
    assert [n["id"] for n in alone] == [steps[1]["id"]]  # a reply without swipes has no siblings


async def test_a_multipart_upload_imports_the_chat_it_carries(api: Api) -> None:
    card = await keeper(api)
    boundary = "----changji-chat"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nnot the file\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="keeper.jsonl"\r\n'
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        + SHORT
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    answer = await api.send(
        "POST", f"/v1/stories/import?card_id={card['id']}&title=From%20a%20form", body, headers=headers
    )
    assert (answer["steps"], answer["nodes"]) == (1, 2)
    assert answer["story"]["title"] == "From a form"
    path = await path_of(api, answer["story"]["id"])
    assert [(n["kind"], n["text"]) for n in path] == [("greeting", GREETINGS[0]), ("user", "Is the ferry late?")]
