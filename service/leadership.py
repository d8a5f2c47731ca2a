"""The duties only one process of a data dir runs (`storage/leadership.py` elects it): started when this
process takes the lead — as it starts, or later, when the process that led has ended — and stopped
when it stops. A process that does not lead looks again every `retry_seconds`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from storage.leadership import LeaderLock

log = logging.getLogger(__name__)
RETRY_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Duty:
    name: str
    start: Callable[[], Awaitable[None]]
    stop: Callable[[], Awaitable[None]]


class Leadership:
    def __init__(self, lock: LeaderLock, duties: Sequence[Duty], retry_seconds: float = RETRY_SECONDS) -> None:
        self.lock, self.duties, self.retry_seconds = lock, list(duties), retry_seconds
        self._started: list[Duty] = []
        self._waiting: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self.lock.held

    async def start(self) -> None:
        if self.lock.try_take():
            await self._take_up()
        else:
            self._waiting = asyncio.create_task(self._wait())

    async def _wait(self) -> None:
        while True:
            await asyncio.sleep(self.retry_seconds)
            if self.lock.try_take():
                log.info("this process leads now: it runs the job system and the checkpoints")
                await self._take_up()
                return

    async def _take_up(self) -> None:
        for duty in self.duties:
            await duty.start()
            self._started.append(duty)

    async def stop(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._waiting
        while self._started:
            duty = self._started.pop()
            try:
                await duty.stop()
            except Exception:
                log.exception("stopping %s failed", duty.name)
        self.lock.release()
