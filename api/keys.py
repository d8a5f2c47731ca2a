"""Typed application and request keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from api.bootstrap import Service

SERVICE: web.AppKey[Service] = web.AppKey("service")
TENANT: web.RequestKey[str] = web.RequestKey("tenant", str)
WORKER: web.AppKey[int] = web.AppKey("worker", int)  # which of `changji serve --workers N` serves (0…N-1)
