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

    async def claim(self) -> None:
        """Take the lead if it is free, before the rest of the service starts (which asks whether this
        process leads: the read side adopts a rebuilt file only if it does); the duties start later."""
        await asyncio.to_thread(self.lock.try_take)  # (a database's lock: a round trip, off the loop)

    async def start(self) -> None:
        """Start the duties if this process leads; then watch the lead (`_wait`)."""
        if await asyncio.to_thread(self.lock.try_take):
            await self._take_up()
        self._waiting = asyncio.create_task(self._wait())

    async def _wait(self) -> None:
        """Look for the lead every `retry_seconds`; once leading, look every as often that the lead is
        still held (a lock on a database connection is lost with it) and, if it is not, stop the duties
        and look for the lead again."""
        while True:
            await asyncio.sleep(self.retry_seconds)
            if self._started:
                if not await asyncio.to_thread(self.lock.still_held):
                    log.warning("this process lost the lead (its lock's connection ended): its duties stop")
                    await self._stop_duties()
                    await asyncio.to_thread(self.lock.release)
                continue
            if await asyncio.to_thread(self.lock.try_take) and await self._take_up():
                log.info("this process leads now: it runs the job system and the checkpoints")

    async def _take_up(self) -> bool:
        """Start the duties; on a failure, stop those started and let the lead go (another process, or
        this one later, tries again)."""
        try:
            for duty in self.duties:
                await duty.start()
                self._started.append(duty)
        except Exception:
            log.exception("the leader's duties could not start; the lead is let go")
            await self._stop_duties()
            await asyncio.to_thread(self.lock.release)
            return False
        return True

    async def stop(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._waiting
        await self._stop_duties()
        await asyncio.to_thread(self.lock.release)

    async def _stop_duties(self) -> None:
        while self._started:
            duty = self._started.pop()
            try:
                await duty.stop()
            except Exception:
                log.exception("stopping %s failed", duty.name)
