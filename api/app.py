"""create_app(settings): the aiohttp application over the service `bootstrap` assembles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from importlib.metadata import PackageNotFoundError, version

import aiohttp_cors
from aiohttp import web

from api.bootstrap import Resource, Service, bootstrap
from api.errors import json_dumps, problem_middleware
from api.keys import SERVICE, WORKER
from api.middleware import auth_middleware, body_limit_middleware, idempotency_middleware
from api.openai_shape import openai_shape_middleware
from api.openapi import build_openapi
from api.routes import add_routes
from api.settings import Settings
from api.web import add_web_routes

OPENAPI: web.AppKey[dict[str, object]] = web.AppKey("openapi", dict)


def package_version() -> str:
    try:
        return version("changji")
    except PackageNotFoundError:
        return "0.0.0"


async def healthz(request: web.Request) -> web.Response:
    svc = request.app[SERVICE]
    health: dict[str, object] = {"status": "ok", "read_model_position": svc.read_side.position}
    if WORKER in request.app:  # (one of several workers: which one answered, and whether it leads)
        health.update(worker=request.app[WORKER], leader=svc.leadership.leading)
    elif svc.settings.shared:  # (one of the processes on a shared database: whether it runs the jobs)
        health.update(leader=svc.leadership.leading)
    return web.json_response(health)


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI], dumps=json_dumps)


def create_app(settings: Settings, service: Service | None = None) -> web.Application:
    """The aiohttp application; `service` (default: `bootstrap(settings)`) is started and stopped with
    it, one cleanup context per resource."""
    app = web.Application(
        middlewares=[
            openai_shape_middleware,
            problem_middleware,
            body_limit_middleware,
            auth_middleware,
            idempotency_middleware,
        ],
        client_max_size=max(settings.max_body_bytes, settings.import_max_bytes),
    )
    app[OPENAPI] = build_openapi(package_version())
    svc = service or bootstrap(settings)
    app[SERVICE] = svc
    for resource in svc.lifecycle():
        app.cleanup_ctx.append(_context(resource))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/openapi.json", openapi)
    add_routes(app)
    add_web_routes(app)
    if settings.cors_origins:
        allow_cors(app, settings.cors_origins)
    return app


EXPOSED = (
    "ETag",
    "Location",
    "Idempotent-Replayed",
    "Retry-After",
    "X-Changji-Story",
    "X-Changji-Node",
    "X-Changji-Recorded",
    "X-Changji-Reason",
)
ASKED = ("Authorization", "Content-Type", "If-Match", "Idempotency-Key", "Accept", "X-Changji-Story")


def allow_cors(app: web.Application, origins: list[str]) -> None:
    """Browser pages of `origins` may call every route (`*`: any page). Preflights are answered
    without a key (`api/middleware.py` lets them through); nothing is sent with credentials — the key
    goes in the Authorization header, which a preflight allows."""
    options = aiohttp_cors.ResourceOptions(  # type: ignore[no-untyped-call]
        allow_credentials=False, expose_headers=EXPOSED, allow_headers=ASKED, max_age=600
    )
    cors = aiohttp_cors.setup(app, defaults={origin: options for origin in origins})
    for route in list(app.router.routes()):
        cors.add(route)


def _context(resource: Resource) -> Callable[[web.Application], AsyncIterator[None]]:
    async def run(_: web.Application) -> AsyncIterator[None]:
        await resource.start()
        yield
        await resource.stop()

    return run
