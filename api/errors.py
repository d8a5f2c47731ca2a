"""DomainError, validation and HTTP errors → RFC 9457 problem+json, at the edge only."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from domain.errors import DomainError, NotFoundError, VersionConflictError

log = logging.getLogger(__name__)
PROBLEM = "application/problem+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadRequestError(Exception):
    """A request problem found by the edge (bad path parameter, header, query)."""

    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.field = status, detail, field


def _pointer(field: str) -> str:
    return "#/" + field.replace(".", "/")


def field_error(field: str, message: str, kind: str) -> dict[str, str]:
    return {"field": field, "pointer": _pointer(field), "message": message, "type": kind}


def problem(status: int, title: str, detail: str, errors: list[dict[str, str]] | None = None) -> web.Response:
    body = {
        "type": f"https://changji.dev/problems/{title.lower().replace(' ', '-')}",
        "title": title,
        "status": status,
        "detail": detail,
        "errors": errors or [],
    }
    return web.Response(status=status, text=json.dumps(body, ensure_ascii=False), content_type=PROBLEM)


def _validation_problem(exc: ValidationError, prefix: str) -> web.Response:
    errors = []
    for e in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        errors.append(field_error(loc or prefix, e["msg"], e["type"]))
    return problem(422, "Unprocessable Content", "the request failed validation", errors)


_DOMAIN_STATUS: list[tuple[type[DomainError], int, str]] = [
    (NotFoundError, 404, "Not Found"),
    (VersionConflictError, 409, "Conflict"),
]


def _locate(request: web.Request, field: str) -> str:
    """Where a domain error's field came from in this request: a header, the path, the query or the body."""
    if field == "If-Match":
        return "header.If-Match"
    if field in request.match_info:
        return f"path.{field}"
    if field in request.query:
        return f"query.{field}"
    return f"body.{field}"


def _domain_problem(request: web.Request, exc: DomainError) -> web.Response:
    status, title = next(((s, t) for cls, s, t in _DOMAIN_STATUS if isinstance(exc, cls)), (422, "Rule Violated"))
    field = None if exc.field is None else _locate(request, exc.field)
    errors = [field_error(field, str(exc), type(exc).__name__)] if field else []
    return problem(status, title, str(exc), errors)


class RequestBodyError(Exception):
    """Wraps a body ValidationError so the field paths start at `body`."""

    def __init__(self, error: ValidationError, prefix: str = "body") -> None:
        super().__init__(str(error))
        self.error, self.prefix = error, prefix


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except RequestBodyError as exc:
        return _validation_problem(exc.error, exc.prefix)
    except DomainError as exc:
        return _domain_problem(request, exc)
    except BadRequestError as exc:
        errors = [field_error(exc.field, exc.detail, "invalid")] if exc.field else []
        response = problem(exc.status, _title(exc.status), exc.detail, errors)
        if exc.status == 408:  # the rest of a stalled body is never read: the connection ends with the answer
            response.force_close()
        return response
    except web.HTTPRequestEntityTooLarge as exc:
        return problem(413, "Content Too Large", exc.text or "the request body is too large")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = problem(exc.status, exc.reason, exc.text or exc.reason)
        if isinstance(exc, web.HTTPMethodNotAllowed):  # which methods the path takes
            response.headers["Allow"] = ", ".join(sorted(exc.allowed_methods))
        return response
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return problem(500, "Internal Server Error", "the server failed while handling the request")


def _title(status: int) -> str:
    return {
        400: "Bad Request",
        401: "Unauthorized",
        404: "Not Found",
        408: "Request Timeout",
        409: "Conflict",
        422: "Unprocessable Content",
    }.get(status, "Error")


def json_dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
