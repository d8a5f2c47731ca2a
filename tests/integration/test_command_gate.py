"""Who runs a domain command: the turn engine's run on the event loop when the writer thread is idle
(no thread hop), on the writer thread otherwise; never two at once, and the fold at a turn's end
never makes the loop wait for the projector thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from api.bootstrap import Service, bootstrap
from api.settings import Settings
from domain.application import Changji
from domain.values import StorySettings
from tests.builders import TENANT, a_card


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[Service]:
    service = bootstrap(Settings(data_dir=tmp_path / "data"))
    await service.start()
    yield service
    await service.close()


def where() -> str:
    return threading.current_thread().name


async def test_a_command_runs_on_the_event_loop_when_the_writer_is_idle(svc: Service) -> None:
    assert await svc.executor.command(where) == threading.current_thread().name
    svc.executor.inline_commands = False
    assert (await svc.executor.command(where)).startswith("changji-writer")
    assert (await svc.executor.load(where)).startswith("changji-writer")  # loads always keep to the thread


def test_commands_keep_to_the_thread_where_every_commit_waits_for_the_disk(tmp_path: Path) -> None:
    svc = bootstrap(Settings(data_dir=tmp_path / "data", sqlite_synchronous="FULL"), background_checkpoints=False)
    try:
        assert not svc.executor.inline_commands
    finally:
        asyncio.run(svc.close())


async def test_a_command_waits_its_turn_behind_a_busy_writer_thread(svc: Service) -> None:
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow() -> str:
        started.set()
        release.wait(5)
        order.append("slow")
        return where()

    busy = asyncio.ensure_future(svc.executor.load(slow))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)

    def quick() -> str:
        order.append("quick")
        return where()

    queued = asyncio.ensure_future(svc.executor.command(quick))
    await asyncio.sleep(0.05)
    assert order == [] and not queued.done()  # neither run on the loop nor alongside `slow`
    assert svc.executor.waiting == 1  # (woken as the writer thread lets the domain go, not looking meanwhile)
    release.set()
    assert (await busy).startswith("changji-writer")
    assert (await queued) == "MainThread"  # on the loop, after `slow`
    assert order == ["slow", "quick"] and svc.executor.waiting == 0


async def test_commands_never_overlap_whichever_thread_runs_them(svc: Service) -> None:
    running, overlaps = [0], [0]

    def step(_: Any = None) -> None:
        running[0] += 1
        overlaps[0] += running[0] > 1
        for _ in range(2000):  # long enough for the other thread to try
            pass
        running[0] -= 1

    await asyncio.gather(*(svc.executor.command(step) if i % 2 else svc.executor.load(step) for i in range(200)))
    assert overlaps[0] == 0


async def test_the_fold_after_a_turn_does_not_wait_for_the_projector(svc: Service) -> None:
    await svc.executor.write(svc.app.cards.create_card, *_card())  # saved and folded
    behind = svc.runner.position
    await svc.executor.command(svc.app.cards.create_card, *_card())  # saved, not folded
    position = int(svc.app.recorder.max_notification_id() or 0)
    assert position > behind
    held, release = threading.Event(), threading.Event()

    def projector() -> None:  # the projector thread, folding just now
        with svc.runner._lock:
            held.set()
            release.wait(5)

    folding = threading.Thread(target=projector)
    folding.start()
    held.wait(5)
    try:
        assert svc.read_side.fold_now(position) == behind  # at once, short of the position: no waiting
    finally:
        release.set()
        folding.join()
    assert svc.read_side.fold_now(position) == position


async def test_the_fold_after_a_short_write_reads_what_another_process_wrote_on_the_same_thread(
    svc: Service, tmp_path: Path
) -> None:
    other = Changji(env=Settings(data_dir=tmp_path / "data").event_store_env())  # another worker, say
    try:
        other.cards.create_card(*_card())
    finally:
        other.close()
    await svc.executor.command(svc.app.cards.create_card, *_card())
    position = int(svc.app.recorder.max_notification_id() or 0)
    assert svc.read_side.fold_now(position) == position  # (a few rows read back: cheaper than a hop)
    assert svc.runner.store.position() == position


async def test_the_fold_after_a_short_write_leaves_a_fold_in_flight_to_its_thread(svc: Service) -> None:
    await svc.executor.command(svc.app.cards.create_card, *_card())
    position = int(svc.app.recorder.max_notification_id() or 0)
    with svc.runner._lock:  # (the projector thread folding just then)
        behind = svc.runner.position  # (read under the lock: a poll's fold may have moved it before)
        assert svc.read_side.fold_now(position) == behind
    assert await svc.read_side.sync(position) == position


def _card() -> tuple[Any, ...]:
    return uuid4(), TENANT, a_card(), StorySettings()


async def test_a_story_is_warm_once_a_context_was_assembled_and_until_it_renders_differently(svc: Service) -> None:
    card_id, story_id = uuid4(), uuid4()
    await svc.executor.write(svc.app.cards.create_card, card_id, TENANT, a_card(), StorySettings())
    await svc.executor.write(svc.app.stories.start_story, story_id, uuid4(), TENANT, card_id, 0, "", {})
    for kind, text in (("user", "风大吗？"), ("reply", "很大。")):
        await svc.executor.write(svc.app.stories.append_node, TENANT, story_id, uuid4(), kind, text)  # type: ignore[arg-type]
    assert not svc.views.warm(story_id)  # (a cold context: its handler sends it to the writer thread)
    await svc.executor.load(svc.views.context, TENANT, story_id, None)
    assert svc.views.warm(story_id)
    leaf = (await svc.executor.load(svc.app.story, TENANT, story_id)).leaf_id
    assert leaf is not None
    await svc.executor.write(svc.app.nodes.hide_node, TENANT, leaf)
    assert not svc.views.warm(story_id)  # its windows start over


def _hold_the_write_lock(path: str, seconds: float, held: Any) -> None:
    from storage.write_lock import WriteLock

    with WriteLock(path):
        held.set()
        time.sleep(seconds)


async def test_a_short_command_waits_for_another_process_s_write_lock_without_holding_the_loop(
    svc: Service, tmp_path: Path
) -> None:
    import multiprocessing

    path = svc.executor.write_lock.path
    assert path is not None
    context = multiprocessing.get_context("spawn")
    held = context.Event()
    other = context.Process(target=_hold_the_write_lock, args=(path, 0.3, held))
    other.start()
    try:
        assert await asyncio.get_running_loop().run_in_executor(None, held.wait, 30)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticking = asyncio.ensure_future(tick())
        started = time.monotonic()
        ran_on = await svc.executor.command(where)  # waits for the other process…
        waited = time.monotonic() - started
        ticking.cancel()
        assert waited > 0.1 and ticks >= 5  # …while the loop went on with other work
        assert ran_on  # (here, or on the writer thread once `LOCK_WAIT` passed)
        assert await svc.executor.short_load(where) == threading.current_thread().name  # a read needs no lock
    finally:
        other.join(10)
