"""Stopping the service: a turn still streaming when it stops records its stop (keeping what it
streamed), jobs stop first and every resource is released; a new service sees it all."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import uuid4

from api.bootstrap import bootstrap
from api.settings import Settings
from domain.values import StorySettings
from providers.fake_server import FakeModelServer, Text
from tests.builders import TENANT, a_card
from tests.fake_model import main_model


async def test_a_turn_running_at_shutdown_is_recorded_as_stopped_and_kept(tmp_path: Path) -> None:
    async with FakeModelServer() as fake:
        fake.script(Text(["半句", "话", "……"], chunk_delay=5.0))  # still streaming when the service stops
        settings = Settings(data_dir=tmp_path / "data", main_model=main_model(fake))
        service = bootstrap(settings)
        await service.start()
        card_id, story_id = uuid4(), uuid4()
        await service.executor.write(service.app.cards.create_card, card_id, TENANT, a_card(), StorySettings())
        await service.executor.write(service.app.stories.start_story, story_id, uuid4(), TENANT, card_id, 0, "", {})
        assert service.turns is not None
        opened = await service.turns.open(TENANT, story_id, "你好", None)
        handle = service.turns.start(TENANT, story_id, opened.reply.id, opened=opened)
        while not fake.requests:  # the model call is under way
            await asyncio.sleep(0.01)
        await service.close()
        assert handle.task.done() and service.jobs.scheduler.running is False
    after = bootstrap(Settings(data_dir=tmp_path / "data"), background_checkpoints=False)
    try:
        reply = after.app.node(opened.reply.id)
        stops = [e for e in after.app.events_of(reply.id) if type(e).__name__ == "TurnStopped"]
        assert reply.phase == "stopped" and [e.reason for e in stops] == ["shutdown"]  # type: ignore[attr-defined]
        after.runner.catch_up()
        row = next(r for r in after.store.dump()["nodes"] if r["id"] == str(reply.id))
        assert row["phase"] == "stopped"
    finally:
        after.app.close()
        after.keys.close()
