"""SillyTavern chats over HTTP: a `.jsonl` becomes a story whose tree keeps the greeting's swipes, every
reply's swipes as siblings, hidden messages hidden and the dates; the export reads back to the same chat and
imports again to the same tree; a broken file is a 4xx at its field with nothing stored; side work is
scheduled as jobs; a keyed retry makes one story; and the `changji import` command imports a chat."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest

from api.settings import Settings
from domain.application import Changji
from interchange.cards import read_card
from interchange.chats import read_chat
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.processes import run
from tests.scene_support import FAST_JOBS, SETTLED
from tests.shared_data import cards_dir

PROBLEM = "application/problem+json"
USER, CHAR = "Mara", "Keeper"
GREETINGS = [
    "The door bangs open in the wind. The ferry comes in three days.",
    "The lamp is lit. Somewhere below, the sea keeps time.",
    "Fog rolls in over the rocks; the keeper does not look up.",
]
START = datetime(2024, 12, 1, 15, 0, tzinfo=UTC)


def st_date(moment: datetime) -> str:
    """SillyTavern's `send_date` form: "December 1, 2024 3:04pm"."""
    half = "pm" if moment.hour >= 12 else "am"
    return f"{moment:%B} {moment.day}, {moment.year} {moment.hour % 12 or 12}:{moment.minute:02d}{half}"


def at(minute: int) -> datetime:
    return START + timedelta(minutes=minute)


def header(**metadata: Any) -> dict[str, Any]:
    return {
        "user_name": USER,
        "character_name": CHAR,
        "create_date": "2024-12-01@15h00m00s",
        "chat_metadata": {"note_prompt": "Storm season.", **metadata},
    }


def message(text: str, minute: int, *, user: bool, hidden: bool = False, **fields: Any) -> dict[str, Any]:
    return {
        "name": USER if user else CHAR,
        "is_user": user,
        "is_system": hidden,
        "send_date": st_date(at(minute)),
        "mes": text,
        "extra": {},
    } | fields


def swiped(texts: list[str], chosen: int, first: int) -> dict[str, Any]:
    """A reply showing swipe `chosen`; swipe i was written at minute `first + i` (its swipe_info)."""
    info: list[dict[str, Any]] = [
        {"send_date": st_date(at(first + i)), "gen_started": None, "gen_finished": None, "extra": {}}
        for i in range(len(texts))
    ]
    return message(texts[chosen], first + chosen, user=False, swipes=texts, swipe_id=chosen, swipe_info=info)


def jsonl(*rows: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(row) for row in rows)


R2_SWIPES = ["R2: first try.", "R2: second try.", "R2: the logbook is in the drawer.", "R2: fourth try."]
R6_SWIPES = ["R6: the ferry, at last.", "R6: no ferry today either."]

# One chat with every case: the greeting's swipes, swiped replies, runs joined, a hidden pair; line 1 the header.
ROWS = [
    header(),
    message(GREETINGS[1], 0, user=False) | {"swipes": GREETINGS, "swipe_id": 1},
    message("U1: Who keeps the light?", 1, user=True),
    message("R1: I do, and have for seven years.", 2, user=False),
    message("U2: Show me the logbook.", 3, user=True),
    swiped(R2_SWIPES, 2, 4),  # swipes written at minutes 4..7, the chosen one at 6
    message("U3: What was that noise?", 8, user=True),
    message("R3: The shutters.", 9, user=False),
    message("R3: Or the gulls.", 10, user=False),  # two replies in a row: joined
    message("U4: I will check the stairs.", 11, user=True),
    message("U4: Hand me the lantern.", 12, user=True),  # two user messages in a row: joined
    message("R4: Mind the seventh step.", 13, user=False),
    message("(OOC) brb, dinner", 14, user=True, hidden=True),  # a hidden pair
    message("(OOC) sure", 15, user=False, hidden=True),
    message("U5: Back. Is the ferry late?", 16, user=True),
    message("R5: It always is.", 17, user=False),
    message("U6: Then we wait.", 18, user=True),
    swiped(R6_SWIPES, 1, 19),  # the last message: swipes at minutes 19, 20
]
PATH = [  # (kind, text, minute, hidden) of the imported path after the root
    ("user", "U1: Who keeps the light?", 1, False),
    ("reply", "R1: I do, and have for seven years.", 2, False),
    ("user", "U2: Show me the logbook.", 3, False),
    ("reply", R2_SWIPES[2], 6, False),
    ("user", "U3: What was that noise?", 8, False),
    ("reply", "R3: The shutters.\n\nR3: Or the gulls.", 10, False),
    ("user", "U4: I will check the stairs.\n\nU4: Hand me the lantern.", 12, False),
    ("reply", "R4: Mind the seventh step.", 13, False),
    ("user", "(OOC) brb, dinner", 14, True),
    ("reply", "(OOC) sure", 15, True),
    ("user", "U5: Back. Is the ferry late?", 16, False),
    ("reply", "R5: It always is.", 17, False),
    ("user", "U6: Then we wait.", 18, False),
    ("reply", R6_SWIPES[1], 20, False),
]
CHAT = jsonl(*ROWS)
NODES = 1 + len(PATH) + (len(R2_SWIPES) - 1) + (len(R6_SWIPES) - 1)
# A short chat that ends on the user's words: for the tests whose subject is the request, not the tree.
SHORT = jsonl(header(), message(GREETINGS[0], 0, user=False), message("Is the ferry late?", 1, user=True))


async def keeper(api: Api) -> dict[str, Any]:
    return await api.card(name=CHAR, first_mes=GREETINGS[0], alternate_greetings=GREETINGS[1:])


async def imported(api: Api, card_id: str, raw: bytes = CHAT, **headers: str) -> dict[str, Any]:
    answer: dict[str, Any] = await api.send("POST", f"/v1/stories/import?card_id={card_id}", raw, headers=headers)
    return answer


async def path_of(api: Api, story_id: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (await api.call("GET", f"/v1/stories/{story_id}/path"))["nodes"]
    return nodes


async def tree_of(api: Api, story_id: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (await api.call("GET", f"/v1/stories/{story_id}/tree?limit=5000"))["nodes"]
    return nodes


async def siblings_of(api: Api, node_id: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (await api.call("GET", f"/v1/nodes/{node_id}/siblings"))["nodes"]
    return nodes


async def story_count(api: Api, card_id: str) -> int:
    return len((await api.call("GET", f"/v1/stories?card_id={card_id}&limit=500"))["items"])


def moment(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


# --- the tree ------------------------------------------------------------------------------------


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


# --- export and the round trip -------------------------------------------------------------------


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


# --- refused files -------------------------------------------------------------------------------


async def refused(
    api: Api, path: str, raw: bytes, status: int, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    async with api.client.post(path, data=raw, headers={**api.headers, **(headers or {})}) as response:
        problem: dict[str, Any] = await response.json(content_type=None)
        assert (response.status, response.content_type) == (status, PROBLEM), problem
    assert problem["status"] == status
    return problem


def fields(problem: dict[str, Any]) -> list[str]:
    return [e["field"] for e in problem["errors"]]


BAD_FILES = [
    ("not-json", b"this is not a chat\nnor JSON at all", "body.file", "no messages"),
    (
        "mes-not-a-string",
        jsonl(header(), message(GREETINGS[0], 0, user=False), message("hi", 1, user=True) | {"mes": 42}),
        "body.line 3.mes",
        "a string expected",
    ),
    ("header-only", jsonl(header()), "body.file", "no messages"),
    ("swipes-not-strings", jsonl(header(), message("a", 0, user=False) | {"swipes": ["a", 1]}), "body.line 2.swipes[1]", "string"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "field", "reason"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
async def test_a_broken_chat_is_refused_at_its_field_and_nothing_is_stored(
    api: Api, raw: bytes, field: str, reason: str
) -> None:
    card = await keeper(api)
    problem = await refused(api, f"/v1/stories/import?card_id={card['id']}", raw, 422)
    assert fields(problem) == [field] and reason in problem["detail"]
    assert await story_count(api, card["id"]) == 0


async def test_an_import_without_a_card_or_body_is_refused_at_its_field(api: Api) -> None:
    card = await keeper(api)
    problem = await refused(api, "/v1/stories/import", CHAT, 422)
    assert fields(problem) == ["query.card_id"]
    problem = await refused(api, f"/v1/stories/import?card_id={card['id']}", b"", 422)
    assert fields(problem) == ["body"]
    assert await story_count(api, card["id"]) == 0


async def test_a_card_of_another_tenant_is_not_found(api: Api, other: Api) -> None:
    card = await keeper(other)
    await refused(api, f"/v1/stories/import?card_id={card['id']}", CHAT, 404)
    assert await story_count(other, card["id"]) == 0
    assert (await api.call("GET", "/v1/stories?limit=500"))["items"] == []


async def test_a_chat_over_the_import_limit_is_413_whether_declared_or_streamed(make_client: MakeClient) -> None:
    api = api_for(await make_client(import_max_bytes=1024), TENANT)
    card = await keeper(api)
    big = jsonl(header(), message(GREETINGS[0], 0, user=False), message("x" * 2000, 1, user=True))
    path = f"/v1/stories/import?card_id={card['id']}"
    problem = await refused(api, path, big, 413)  # Content-Length over the limit: refused unread
    assert "1024" in problem["detail"]

    async def chunks() -> Any:
        for start in range(0, len(big), 256):
            yield big[start : start + 256]

    async with api.client.post(path, data=chunks(), headers=api.headers) as response:  # no Content-Length
        problem = await response.json(content_type=None)
        assert (response.status, response.content_type) == (413, PROBLEM), problem
    assert fields(problem) == ["body"]
    assert await story_count(api, card["id"]) == 0
    assert len(SHORT) < 1024
    await imported(api, card["id"], SHORT)  # under the limit: imported
    assert await story_count(api, card["id"]) == 1


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


# --- side work -----------------------------------------------------------------------------------


def long_chat(turns: int) -> bytes:
    rows = [header(), message(GREETINGS[0], 0, user=False)]
    for i in range(1, turns + 1):
        rows.append(message(f"第{i}问：灯塔今晚还亮着吗？渡船什么时候到？雾会不会散？", 2 * i - 1, user=True))
        rows.append(message(f"第{i}答：亮着。渡船第{i}天会来，雾到傍晚才散，你先把窗关好。", 2 * i, user=False))
    return jsonl(*rows)


async def settled_jobs(api: Api, story_id: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        glance: dict[str, Any] = await api.call("GET", f"/v1/stories/{story_id}/jobs")
        if glance["settled"]:
            return glance
        assert asyncio.get_running_loop().time() < deadline, f"jobs not settled in {timeout}s: {glance}"
        await asyncio.sleep(0.05)


async def test_an_imported_long_chat_schedules_its_compaction_as_jobs(make_client: MakeClient) -> None:
    api = api_for(await make_client(embedder="hashing", **FAST_JOBS), TENANT)  # e5 would embed 200 archived turns
    card = await keeper(api)
    small = {"keep_turns": 4, "pack_turns": 10, "min_pack_chars": 0, "fill_window": False}  # packs of 10 turns, shown
    await api.call("PATCH", f"/v1/cards/{card['id']}", {"settings": small})
    answer = await imported(api, card["id"], long_chat(200))
    story_id = answer["story"]["id"]
    assert (answer["steps"], answer["nodes"]) == (400, 401)
    leaf = answer["story"]["leaf_id"]
    compacts = (await api.call("GET", f"/v1/jobs?story_id={story_id}&kind=compact&limit=500"))["items"]
    assert compacts and compacts[0]["node_id"] == leaf  # announced by the import's last reply
    assert all(j["status"] in ("pending", "running", "retrying", *SETTLED) for j in compacts)
    glance = await api.call("GET", f"/v1/stories/{story_id}/jobs")
    assert sum(glance["counts"].values()) == 200 + 1  # a scribe job per reply, and the compaction: none run inline

    glance = await settled_jobs(api, story_id)
    assert glance["counts"].get("failed", 0) == 0, glance
    compacts = (await api.call("GET", f"/v1/jobs?story_id={story_id}&kind=compact&limit=500"))["items"]
    assert compacts and all(j["status"] == "done" for j in compacts), compacts
    context = await api.call("GET", f"/v1/stories/{story_id}/context")
    kinds = [b["what"] for b in context["explain"]]
    assert "digest" in kinds and "episode" in kinds, kinds
    summaries = await api.call("GET", f"/v1/stories/{story_id}/summaries")
    assert summaries["uncovered_turns"] < 4 + 10  # one job caught up: no pack is still due
    assert all(e["last_turn"] - e["first_turn"] == 9 for e in summaries["episodes"])


# --- retries -------------------------------------------------------------------------------------


async def test_a_keyed_retry_answers_the_same_story_and_stores_one(api: Api) -> None:
    card = await keeper(api)
    key = {"Idempotency-Key": "chat-import-1"}
    first = await imported(api, card["id"], SHORT, **key)
    second = await imported(api, card["id"], SHORT, **key)
    assert second["story"]["id"] == first["story"]["id"] and second == first
    assert await story_count(api, card["id"]) == 1
    third = await imported(api, card["id"], SHORT)  # no key: a new story
    assert third["story"]["id"] != first["story"]["id"]
    assert await story_count(api, card["id"]) == 2


async def test_a_reused_key_for_another_card_is_refused(api: Api) -> None:
    card, other_card = await keeper(api), await keeper(api)
    key = {"Idempotency-Key": "chat-import-2"}
    first = await imported(api, card["id"], SHORT, **key)
    assert first["story"]["card_id"] == card["id"]
    async with api.client.post(
        f"/v1/stories/import?card_id={other_card['id']}", data=SHORT, headers={**api.headers, **key}
    ) as response:
        answer = await response.json(content_type=None)
    assert await story_count(api, other_card["id"]) == 0
    assert response.status == 422, answer  # not a story of the first card


# --- the command line ----------------------------------------------------------------------------


@dataclass
class CliData:
    data_dir: Path
    chat: Path
    card_id: str
    first: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory: pytest.TempPathFactory) -> CliData:
    """One `changji import` of a card and a chat without --card: the card is imported, the chat refused."""
    folder = tmp_path_factory.mktemp("cli")
    png = cards_dir() / "default_Seraphina.png"
    greeting = read_card(png.read_bytes()).data["first_mes"]
    rows = [header() | {"character_name": "Seraphina"}, message(greeting, 0, user=False) | {"name": "Seraphina"}]
    for i in range(1, 4):
        rows += [message(f"Question {i}?", 2 * i - 1, user=True), message(f"Answer {i}.", 2 * i, user=False)]
    rows[-1] |= {"swipes": ["Answer 3, first.", "Answer 3."], "swipe_id": 1}
    chat = folder / "glade.jsonl"
    chat.write_bytes(jsonl(*rows))
    result = run("import", "--data-dir", str(folder / "data"), str(png), str(chat))
    found = re.search(r"^card\s+([0-9a-f-]{36})\s+Seraphina", result.stdout, re.MULTILINE)
    assert found, (result.stdout, result.stderr)
    return CliData(folder / "data", chat, found[1], result)


@pytest.mark.slow
def test_the_import_command_refuses_a_chat_without_card_and_keeps_the_card(cli_data: CliData) -> None:
    result = cli_data.first
    assert result.returncode != 0
    assert "--card" in result.stderr and "glade.jsonl" in result.stderr
    assert "1 of 2 file(s) refused" in result.stderr
    app = Changji(env=Settings(data_dir=cli_data.data_dir).event_store_env())
    try:
        assert app.card("local", UUID(cli_data.card_id)).data.name == "Seraphina"
    finally:
        app.close()


@pytest.mark.slow
def test_the_import_command_makes_a_story_of_the_card(cli_data: CliData) -> None:
    result = run("import", "--data-dir", str(cli_data.data_dir), "--card", cli_data.card_id, str(cli_data.chat))
    assert result.returncode == 0, result.stderr
    found = re.search(r"^story\s+[0-9a-f-]{36}\s+glade: (\d+) messages, (\d+) nodes", result.stdout, re.MULTILINE)
    assert found, result.stdout
    assert (int(found[1]), int(found[2])) == (6, 8)  # 3 turns; the root and one more swipe
