"""Typed application and request keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from api.bootstrap import Service

SERVICE: web.AppKey[Service] = web.AppKey("service")
TENANT: web.RequestKey[str] = web.RequestKey("tenant", str)
