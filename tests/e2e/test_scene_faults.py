"""Fault test: the side model answers garbage, HTTP 500 or nothing at all (a timeout) for 30 % of the
calls over 200 turns. Every turn completes without a 5xx, every failed attempt is recorded and
retried, and every scribe patch is still computed in path order from the previous turn's result."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Mapping
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Status, Step, Text
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, answer, jobs, ledger_of, scene, settled, side_model, turn_of

pytestmark = pytest.mark.slow
STORIES, TURNS = 4, 50
READ_TIMEOUT = 0.2


class FlakyScribe:
    """Fails 30 % of calls (a third each: 500, garbage, a stall past the client's read timeout)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.faults = 0
        self.out_of_order: list[str] = []

    def __call__(self, body: Mapping[str, Any]) -> Step:
        roll = self.rng.random()
        if roll < 0.3:
            self.faults += 1
            if roll < 0.1:
                return Status(500)
            if roll < 0.2:
                return Text("抱歉，我这轮没法整理账本。")
            return Text("{}", delay=READ_TIMEOUT * 3)
        turn = int(re.search(r"第(\d+)答", turn_of(body)).group(1))  # type: ignore[union-attr]
        expected = f"第{turn - 1}轮" if turn > 1 else ""
        if ledger_of(body)["time"] != expected:
            self.out_of_order.append(f"turn {turn} saw {ledger_of(body)['time']!r}")
        return answer({"time": f"第{turn}轮", "flags": {f"t{turn}": "记下"}})


async def play(api: Api, story_id: str) -> None:
    for turn in range(1, TURNS + 1):
        await api.turn(story_id, f"第{turn}问", f"第{turn}答")


async def test_every_turn_completes_and_every_failed_scribe_is_retried_until_done(make_client: MakeClient) -> None:
    flaky = FlakyScribe(seed=30)
    async with FakeModelServer(flaky) as side:
        client = await make_client(
            side_model=side_model(side, read_timeout=READ_TIMEOUT), job_max_attempts=12, **FAST_JOBS
        )
        api = api_for(client, TENANT)
        # the scribe's jobs only: no compaction, and no recap for the card's memory (its sweep, every 30 s, meets a
        # slow run's stories past their 40th turn and asks the side model what this scribe cannot answer)
        stories = [(await api.story(pack_turns=0, card_memory=False))["id"] for _ in range(STORIES)]
        await asyncio.gather(*(play(api, story_id) for story_id in stories))
        rows = [row for story_id in stories for row in (await settled(api, story_id, timeout=180)).values()]
        assert len(rows) == STORIES * TURNS
        assert {row["status"] for row in rows} == {"done"}
        assert sum(row["attempts"] for row in rows) == flaky.faults > 0  # every failure recorded, then retried
        assert flaky.out_of_order == []
        for story_id in stories:
            final = await scene(api, story_id)
            assert final["state"]["time"] == f"第{TURNS}轮"
            assert final["state"]["flags"] == {f"t{turn}": "记下" for turn in range(1, TURNS + 1)}
            assert await jobs(api, story_id, status="retrying") == []
        costs = [await api.call("GET", f"/v1/stories/{story_id}/costs") for story_id in stories]
        calls = sum(line["calls"] for c in costs for line in c["lines"] if line["purpose"] == "scribe")
        assert calls == len(side.requests) == STORIES * TURNS + flaky.faults
        await client.close()
