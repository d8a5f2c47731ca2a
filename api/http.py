"""Small request/response helpers shared by the handlers: body parsing, ids, If-Match, ETags, JSON."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from typing import TypeVar
from uuid import UUID, uuid4, uuid5

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from api.bootstrap import Service
from api.errors import BadRequestError, RequestBodyError
from api.keys import SERVICE, TENANT

M = TypeVar("M", bound=BaseModel)
IF_MATCH_PATTERN = r'\*|(?:W/)?"?([0-9]{1,18})"?'
"""What If-Match takes: `*`, or a version as an ETag (`"7"`, `W/"7"`) or bare (`7`)."""
IDEMPOTENCY_KEY_PATTERN = r"[!-~](?:[ -~]{0,253}[!-~])?"
"""What Idempotency-Key takes: 1–255 printable ASCII characters, not starting or ending with a space."""
log = logging.getLogger(__name__)


def service(request: web.Request) -> Service:
    return request.app[SERVICE]


def tenant(request: web.Request) -> str:
    return request[TENANT]


IDEMPOTENT_IDS = UUID("5d3f0a53-6c1b-4e0c-9f57-2f4a8d7e0b61")  # the namespace of ids made from a key


def new_id(request: web.Request, purpose: str) -> UUID:
    """The id of something this request creates: random, or — with an `Idempotency-Key` — made from the
    tenant, the key, the request's method, path and query, and `purpose`, so a retry after a crash between
    the commit and the answer names the same thing and finds it made (`api/middleware.py`)."""
    key = request.headers.get("Idempotency-Key")
    if key is None or TENANT not in request:
        return uuid4()
    return uuid5(IDEMPOTENT_IDS, f"{request[TENANT]}\n{key}\n{request.method} {request.path_qs}\n{purpose}")


def keyed(request: web.Request) -> bool:
    """Whether the request carries an `Idempotency-Key` (what it creates may exist from a lost answer)."""
    return "Idempotency-Key" in request.headers


FILE_ROUTES = frozenset(
    {"/v1/cards/import", "/v1/stories/import", "/v1/cards/{card_id}/lorebooks", "/v1/chat/completions"}
)
"""The routes whose bodies are files (or a front end's whole history), under the import limit rather than
the JSON body limit."""


def body_limit(request: web.Request) -> int:
    settings = request.app[SERVICE].settings
    resource = request.match_info.route.resource
    files = request.method == "POST" and resource is not None and resource.canonical in FILE_ROUTES
    return settings.import_max_bytes if files else settings.max_body_bytes


async def read_body(request: web.Request) -> bytes:
    """The request's body, waited for at most the service's `body_seconds` (a body that stalls is 408),
    and at most `body_limit` bytes (413)."""
    seconds = request.app[SERVICE].settings.body_seconds
    try:
        raw = await asyncio.wait_for(request.read(), seconds)
    except TimeoutError:
        raise BadRequestError(408, f"the request body did not arrive within {seconds:g} s", "body") from None
    except web.HTTPRequestEntityTooLarge:  # sent without a length, and longer than the route takes
        raise BadRequestError(413, f"the body may be at most {body_limit(request)} bytes", "body") from None
    except ConnectionResetError:  # the client went away mid-upload: nothing to answer, nothing to log loudly
        log.info("a client went away before its request body arrived")
        raise BadRequestError(400, "the request body was cut off", "body") from None
    if len(raw) > (limit := body_limit(request)):
        raise BadRequestError(413, f"the body may be at most {limit} bytes", "body")
    return raw


async def body(request: web.Request, model: type[M], optional: bool = False) -> M:
    """The request's JSON body as `model`; a missing one is refused (422), or read as `{}` where the
    route's body is `optional` (every field has a default: `POST …/regenerate`, `…/compact`, `…/saves`) and
    the request sent no byte of one."""
    raw = await read_body(request)
    if not raw.strip():
        if not optional:
            raise BadRequestError(422, "a JSON body is required", "body")
        if raw:  # (whitespace alone is no JSON, and no absent body either)
            raise BadRequestError(422, "the body is only whitespace: send JSON, or no body at all", "body")
        raw = b"{}"
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestBodyError(exc) from None


def path_id(request: web.Request, name: str) -> UUID:
    try:
        return UUID(request.match_info[name])
    except ValueError:
        raise BadRequestError(404, f"{name} is not a known id", f"path.{name}") from None


INTEGER = re.compile(r"-?[0-9]{1,20}")
"""An integer in the query: ASCII digits, perhaps a minus sign (not `+1`, `1_000` or other digits)."""
IF_MATCH = re.compile(IF_MATCH_PATTERN)
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
"""A UUID as the OpenAPI document's `format: uuid` says: 8-4-4-4-12 hex digits."""


def query_id(request: web.Request, name: str) -> UUID | None:
    """An id in the query (None: not given); anything but a UUID's 8-4-4-4-12 form is refused (422)."""
    value = request.query.get(name)
    if value is None:
        return None
    if not UUID_TEXT.fullmatch(value):
        raise BadRequestError(422, f"{name} must be a UUID", f"query.{name}")
    return UUID(value)


def query_text(request: web.Request, name: str, most: int, required: bool = True) -> str:
    """A text in the query, 1–`most` characters of which one at least is not whitespace, stripped (422
    otherwise; "" when it may be left out and was)."""
    value = request.query.get(name)
    if value is None and not required:
        return ""
    if value is None or not 1 <= len(value) <= most or not value.strip():
        raise BadRequestError(422, f"{name} must be 1–{most} characters, not only spaces", f"query.{name}")
    return value.strip()


def query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    value = request.query.get(name)
    if value is None:
        return default
    if not INTEGER.fullmatch(value):
        raise BadRequestError(422, f"{name} must be an integer", f"query.{name}")
    number = int(value)
    if not low <= number <= high:
        raise BadRequestError(422, f"{name} must be between {low} and {high}", f"query.{name}")
    return number


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    if value is None:
        return default
    if value not in ("true", "false"):
        raise BadRequestError(422, f"{name} must be true or false", f"query.{name}")
    return value == "true"


def if_match(request: web.Request) -> int | None:
    """The expected version from `If-Match: "7"` (weak tags and bare numbers accepted; `*`: any)."""
    value = request.headers.get("If-Match")
    if value is None:
        return None
    tag = IF_MATCH.fullmatch(value.strip())
    if tag is None:
        raise BadRequestError(400, 'If-Match must be an ETag such as "7"', "header.If-Match")
    return int(tag[1]) if tag[1] else None


def respond(model: BaseModel, status: int = 200, version: int | None = None) -> web.Response:
    response = web.Response(
        status=status, body=model.model_dump_json().encode(), content_type="application/json", charset="utf-8"
    )
    if version is not None:
        response.headers["ETag"] = f'"{version}"'
    return response


def json_bytes(data: object) -> bytes:
    """JSON with orjson: dataclasses, UUIDs and datetimes encode natively."""
    return orjson.dumps(data)


def fingerprint(method: str, path: str, raw: bytes) -> str:
    return hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + raw).hexdigest()
