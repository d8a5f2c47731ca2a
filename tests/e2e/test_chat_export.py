"""An imported chat exported over HTTP: the tree export reads back to the chat imported, a path export keeps
only the greeting's swipes and can end at any node, and the export imports again to the same tree."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import orjson
import pytest

from interchange.chats import read_chat
from tests.builders import Api
from tests.e2e.chat_import_support import (
    CHAR,
    CHAT,
    GREETINGS,
    PATH,
    R2_SWIPES,
    R6_SWIPES,
    ROWS,
    imported,
    jsonl,
    keeper,
    moment,
    path_of,
    story_count,
    tree_of,
)

pytestmark = pytest.mark.both_stores

Step = tuple[str, str, bool, list[str], int, datetime | None]


def steps_of(raw: bytes) -> list[Step]:
    """A chat file's steps as read back: role, chosen text, hidden, every swipe in order, the chosen one's
    place, the chosen one's date."""
    plan = read_chat(raw)
    out: list[Step] = []
    for step in plan.steps:
        at_ = step.chosen_index
        swipes = [t.text for t in (*step.alternatives[:at_], step.chosen, *step.alternatives[at_:])]
        out.append((step.role, step.chosen.text, step.hidden, swipes, at_, step.chosen.sent_at))
    return out


def rows_of(raw: bytes) -> tuple[dict[str, Any], list[tuple[bool, bool, str, list[str], int]]]:
    """A chat file's header, and each message as (is_user, is_system, mes, swipes, swipe_id); a message
    without swipes counts as its one text."""
    header, *rows = [orjson.loads(line) for line in raw.split(b"\n")]
    messages = [
        (r["is_user"], r["is_system"], r["mes"], r.get("swipes") or [r["mes"]], r.get("swipe_id") or 0) for r in rows
    ]
    return header, messages


def expected_rows() -> list[tuple[bool, bool, str, list[str], int]]:
    swipes = {R2_SWIPES[2]: (R2_SWIPES, 2), R6_SWIPES[1]: (R6_SWIPES, 1)}
    greeting = (False, False, GREETINGS[1], GREETINGS, 1)
    return [greeting] + [
        (kind == "user", hidden, text, *swipes.get(text, ([text], 0))) for kind, text, _, hidden in PATH
    ]


async def texts_by_depth(api: Api, story_id: str) -> dict[int, list[tuple[str, str, bool]]]:
    """Every node of the story by depth, oldest first: kind, full text, hidden."""
    by_depth: dict[int, list[tuple[str, str, bool]]] = defaultdict(list)
    for row in await tree_of(api, story_id):
        node = await api.call("GET", f"/v1/nodes/{row['id']}")
        by_depth[node["depth"]].append((node["kind"], node["text"], node["hidden"]))
    return dict(by_depth)


async def test_a_tree_export_reads_back_to_the_chat_imported(api: Api) -> None:
    card = await keeper(api)
    story = (await imported(api, card["id"]))["story"]
    raw, headers = await api.fetch(f"/v1/stories/{story['id']}/export?format=sillytavern&scope=tree")
    assert headers["Content-Type"].startswith("application/jsonl")
    assert "attachment" in headers["Content-Disposition"]

    header, messages = rows_of(raw)
    assert header["character_name"] == CHAR and header["chat_metadata"] == ROWS[0]["chat_metadata"]
    assert messages == expected_rows()
    plan = read_chat(raw)
    assert [g.text for g in plan.greetings] == GREETINGS and plan.greeting_index == 1
    assert plan.warnings == () and plan.skipped_lines == ()
    assert steps_of(raw) == steps_of(CHAT)  # the original's steps, once its runs are joined


async def test_a_path_export_has_no_reply_swipes_and_ends_at_the_node_asked(api: Api) -> None:
    card = await keeper(api)
    story = (await imported(api, card["id"]))["story"]
    raw, _ = await api.fetch(f"/v1/stories/{story['id']}/export?scope=path")
    _, messages = rows_of(raw)
    greeting, *rest = [orjson.loads(line) for line in raw.split(b"\n")][1:]
    assert greeting["swipes"] == GREETINGS  # the greeting's swipes are the card's greetings, not siblings
    assert not any("swipes" in row for row in rest)
    assert [(u, h, m) for u, h, m, _, _ in messages] == [(u, h, m) for u, h, m, _, _ in expected_rows()]

    path = await path_of(api, story["id"])
    raw, _ = await api.fetch(f"/v1/stories/{story['id']}/export?scope=tree&at={path[4]['id']}")
    _, messages = rows_of(raw)
    assert messages == expected_rows()[:5]  # the greeting and the first four steps, R2 with its swipes


async def test_an_exported_chat_imports_again_to_the_same_tree(api: Api) -> None:
    card = await keeper(api)
    first = await imported(api, card["id"])
    raw, _ = await api.fetch(f"/v1/stories/{first['story']['id']}/export?scope=tree")
    second = await imported(api, card["id"], raw)
    assert second["story"]["id"] != first["story"]["id"]
    assert (second["steps"], second["nodes"], second["warnings"]) == (first["steps"], first["nodes"], [])
    assert await texts_by_depth(api, second["story"]["id"]) == await texts_by_depth(api, first["story"]["id"])
    again, before = await path_of(api, second["story"]["id"]), await path_of(api, first["story"]["id"])
    assert [(n["kind"], n["text"], n["hidden"]) for n in again] == [(n["kind"], n["text"], n["hidden"]) for n in before]
    assert [moment(n["created_at"]) for n in again[1:]] == [moment(n["created_at"]) for n in before[1:]]
    assert await story_count(api, card["id"]) == 2


GEN = ("2024-12-01T15:04:00.120Z", "2024-12-01T15:04:09.870Z")


async def test_a_chat_exported_and_imported_again_gives_the_same_file(api: Api) -> None:
    """Generation times (of the message and of each swipe) and the header's date come back out as they went
    in; a hidden swipe stays out of the swipes (SillyTavern hides messages, not swipes); the export of the
    re-import is the export, byte for byte."""
    timed = [dict(row) for row in ROWS]
    timed[3] |= {"gen_started": GEN[0], "gen_finished": GEN[1]}  # R1
    timed[5] = timed[5] | {
        "swipe_info": [dict(info) | {"gen_started": f"s{i}"} for i, info in enumerate(timed[5]["swipe_info"])]
    }
    card = await keeper(api)
    first = await imported(api, card["id"], jsonl(*timed))
    raw, _ = await api.fetch(f"/v1/stories/{first['story']['id']}/export?scope=tree")
    header, *rows = [orjson.loads(line) for line in raw.split(b"\n")]
    assert header["create_date"] == ROWS[0]["create_date"]
    r1 = next(r for r in rows if r["mes"] == ROWS[3]["mes"])
    assert (r1["gen_started"], r1["gen_finished"]) == GEN
    r2 = next(r for r in rows if r.get("swipes") == R2_SWIPES)
    assert [info["gen_started"] for info in r2["swipe_info"]] == ["s0", "s1", "s2", "s3"]

    path = await path_of(api, first["story"]["id"])
    r2_node = next(n for n in path if n["text"] == R2_SWIPES[2])
    hidden = next(
        s for s in (await api.call("GET", f"/v1/nodes/{r2_node['id']}/siblings"))["nodes"] if s["text"] == R2_SWIPES[0]
    )
    await api.call("POST", f"/v1/nodes/{hidden['id']}/hide")
    raw, _ = await api.fetch(f"/v1/stories/{first['story']['id']}/export?scope=tree")
    r2 = next(orjson.loads(line) for line in raw.split(b"\n") if R2_SWIPES[2].encode() in line)
    assert r2["swipes"] == R2_SWIPES[1:] and r2["swipe_id"] == 1  # the hidden swipe left out

    second = await imported(api, card["id"], raw)
    again, _ = await api.fetch(f"/v1/stories/{second['story']['id']}/export?scope=tree")
    assert again == raw
