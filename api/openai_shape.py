"""The OpenAI-compatible routes answer errors in OpenAI's shape — `{"error": {"message", "type", "param",
"code"}}` — which its clients read, where every other route answers RFC 9457 problem+json. One middleware,
outermost, turns the problem a route (or the key check) answered into that shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from api.errors import PROBLEM

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPENAI_ROUTES = frozenset({"/v1/chat/completions", "/v1/models"})
CODES = {401: "invalid_api_key", 404: "not_found", 408: "timeout", 413: "request_too_large", 429: "rate_limit_exceeded"}


def openai_error(status: int, message: str, param: str | None = None, code: str | None = None) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "api_error"
    if status == 401:
        kind = "authentication_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code or CODES.get(status)}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


@web.middleware
async def openai_shape_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if request.path not in OPENAI_ROUTES or response.status < 400 or not isinstance(response, web.Response):
        return response
    if response.content_type != PROBLEM or response.body is None:
        return response
    problem = orjson.loads(bytes(response.body))  # type: ignore[arg-type]
    errors = problem.get("errors") or [{}]
    shaped = openai_error(response.status, str(problem.get("detail") or problem.get("title")), errors[0].get("field"))
    for name in ("WWW-Authenticate", "Retry-After", "Allow"):
        if name in response.headers:
            shaped.headers[name] = response.headers[name]
    return shaped
