"""Stops asked of turns another process may be running: one empty file per reply in a folder of the data
dir. The worker that answers `POST …/stop` may not be the one running the turn (`changji serve
--workers N`); it leaves a request here, and the worker running that turn, which looks every
`LOOK_SECONDS` while it runs turns, stops it as a stop asked of it directly would (keeping what was
streamed), and takes the request away.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from uuid import UUID

LOOK_SECONDS = 0.1


class StopRequests:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def ask(self, reply_id: UUID) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.folder / reply_id.hex, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def asked(self, reply_ids: Iterable[UUID]) -> list[UUID]:
        """Which of these replies a stop was asked of (a look per reply: a turn's stop costs no listing)."""
        return [reply_id for reply_id in reply_ids if (self.folder / reply_id.hex).exists()]

    def clear(self, reply_id: UUID) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / reply_id.hex).unlink()

    def close(self) -> None:
        return None
