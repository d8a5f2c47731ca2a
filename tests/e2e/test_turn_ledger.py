"""What engine turns leave in the read models: the cost ledger per story and per card, and tables that a
rebuild from the event log reproduces exactly (sealed, stopped, asked and withdrawn replies, model calls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.bootstrap import Service, bootstrap
from api.keys import SERVICE
from api.settings import Settings
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.fake_server import Drop, FakeModelServer, Status, Text
from tests.builders import OTHER_TENANT, Api, api_for
from tests.fake_model import SSE, EventStream, MakeEngine, ask, calls, costs, post_turn, write

pytestmark = pytest.mark.both_stores


async def test_costs_sum_the_tokens_of_every_call_per_story_and_per_card(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    engine = await make_engine(max_retries=0)
    card = await engine.card()
    first, second = await engine.story(card["id"]), await engine.story(card["id"])
    elsewhere = await engine.story()
    fake.script(
        Text("一。", prompt_tokens=120, completion_tokens=7),  # first story: 1 call
        calls(write(0, "二。")),  # first story: 2 calls (100 + 1 tokens, then 150 + 3)
        Text("尾。", prompt_tokens=150, completion_tokens=3),
        Status(status=400),  # second story: a failed call (no tokens) …
        Text("好。", prompt_tokens=90, completion_tokens=11),  # … and a regenerate that works
        Text("别处。", prompt_tokens=1000, completion_tokens=1000),  # another card's story
    )
    await post_turn(engine, first["id"])
    await post_turn(engine, first["id"])
    failed = await post_turn(engine, second["id"])
    assert failed["outcome"] == "error"
    await engine.call("POST", f"/v1/stories/{second['id']}/regenerate", {}, 201)
    await post_turn(engine, elsewhere["id"])

    one = await costs(engine, f"/v1/stories/{first['id']}")
    assert (one["calls"], one["prompt_tokens"], one["completion_tokens"]) == (3, 370, 11)
    assert [(line["purpose"], line["model"], line["calls"], line["ok"]) for line in one["lines"]] == [
        ("turn", "fake-main", 3, 3)
    ]
    two = await costs(engine, f"/v1/stories/{second['id']}")
    assert (two["calls"], two["prompt_tokens"], two["completion_tokens"]) == (2, 90, 11)
    assert two["lines"][0]["ok"] == 1  # the failed call counts, with its outcome ≠ ok
    by_card = await costs(engine, f"/v1/cards/{card['id']}")
    assert (by_card["calls"], by_card["prompt_tokens"], by_card["completion_tokens"]) == (5, 460, 22)
    assert by_card["lines"][0]["ok"] == 4
    assert by_card["lines"][0]["latency_ms"] > 0


async def test_costs_of_a_story_without_turns_are_empty(engine: Api) -> None:
    story = await engine.story()
    ledger = await costs(engine, f"/v1/stories/{story['id']}")
    assert ledger == {"lines": [], "calls": 0, "prompt_tokens": 0, "completion_tokens": 0}


async def test_costs_of_another_tenant_are_not_found(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story()
    fake.script(Text("好。"))
    await post_turn(engine, story["id"])
    other = api_for(engine.client, OTHER_TENANT)
    await other.call("GET", f"/v1/stories/{story['id']}/costs", status=404)
    await other.call("GET", f"/v1/cards/{story['card_id']}/costs", status=404)


async def play_every_ending(fake: FakeModelServer, engine: Api) -> dict[str, str]:
    """Sealed, revised (withdrawn), stopped by an error, asked and answered, asked and left waiting."""
    story = await engine.story()
    fake.script(
        calls(write(0, "风很大。")),
        calls(("draft_seal", {"version": 1})),
        calls(("previous_draft_read", {})),
        calls(("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})),
        Drop(["说到一半"]),
    )
    sealed = await post_turn(engine, story["id"])
    withdrawn = await post_turn(engine, story["id"], "改一下上一段。")
    stopped = await post_turn(engine, story["id"], "接着说。", status=201)
    fake.script(calls(ask("去哪？", "灯塔", "码头")), Text("去了码头。"))
    answered = await engine.call("POST", f"/v1/stories/{story['id']}/regenerate", {}, 201)
    await engine.call("POST", f"/v1/nodes/{answered['reply']['id']}/answer", {"answer": "码头"}, 201)
    fake.script(calls(ask("然后呢？", "睡觉", "守夜")))
    waiting = await post_turn(engine, story["id"], "然后呢？")
    outcomes = [t["outcome"] for t in (sealed, withdrawn, stopped, waiting)]
    assert outcomes == ["sealed", "revised", "error", "asked"]
    return {
        "sealed": sealed["reply"]["id"],
        "withdrawn": withdrawn["reply"]["id"],
        "stopped": stopped["reply"]["id"],
        "answered": answered["reply"]["id"],
        "waiting": waiting["reply"]["id"],
    }


async def test_rebuilt_read_models_equal_the_live_ones_after_engine_turns(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    engine = await make_engine()
    replies = await play_every_ending(fake, engine)
    live_service: Service = engine.client.app[SERVICE]
    await live_service.read_side.sync()
    await live_service.read_side.searchable()
    live = await live_service.executor.query(live_service.store.dump)
    phases = {row["id"]: row["phase"] for row in live["nodes"]}
    assert {name: phases[node_id] for name, node_id in replies.items()} == {
        "sealed": "sealed",
        "withdrawn": "withdrawn",
        "stopped": "stopped",
        "answered": "sealed",
        "waiting": "waiting",
    }
    assert {row["outcome"] for row in live["model_calls"]} == {"ok", "interrupted"}
    assert next(r for r in live["nodes"] if r["id"] == replies["sealed"])["revisions"] == 1

    # `changji projections rebuild`: the server stopped, a fresh service replays the whole log
    data_dir = live_service.settings.data_dir
    await engine.client.close()
    offline = bootstrap(Settings(data_dir=data_dir, database_url=live_service.settings.database_url))
    try:
        offline.runner.rebuild()
        rebuilt = offline.store.dump()
    finally:
        await offline.close()
    assert rebuilt == live


async def test_read_models_folded_from_scratch_equal_the_live_ones_while_serving(
    fake: FakeModelServer, make_engine: MakeEngine, tmp_path: Path
) -> None:
    engine = await make_engine()
    await play_every_ending(fake, engine)
    svc: Service = engine.client.app[SERVICE]
    await svc.read_side.sync()
    await svc.read_side.searchable()
    fresh = ProjectionRunner(svc.app, ReadModels(tmp_path / "fresh.sqlite"))
    await svc.executor.load(fresh.catch_up)
    await svc.executor.load(fresh.index_search)
    assert fresh.store.dump() == await svc.executor.query(svc.store.dump)


async def test_costs_count_a_model_call_cut_short_by_stop(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story()
    fake.script(Text([f"第{i}句。" for i in range(1, 21)], chunk_delay=0.1))
    async with engine.client.post(
        f"/v1/stories/{story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        seen = await EventStream(response).until("delta")
        stopped = await engine.call("POST", f"/v1/nodes/{seen[0][1]['reply_id']}/stop")
    assert stopped["was_running"] is True
    assert stopped["reply"]["text"]  # the model was called and streamed text …
    ledger = await costs(engine, f"/v1/stories/{story['id']}")
    assert ledger["calls"] == 1  # … so the ledger holds that call, with an outcome ≠ ok
    assert ledger["lines"][0]["ok"] == 0
