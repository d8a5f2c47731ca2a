"""Every status and content type a route can answer, said by rules over the route table: what it reads (a
body, a file, ids, the query), whether it writes, whether it streams, and whether it is an OpenAI-compatible
route (its errors in OpenAI's shape rather than RFC 9457 problem+json)."""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel

from api.openapi.requests import REF
from api.routes import Route
from api.schemas.common import Problem
from api.schemas.proxy import OpenAIError

COMPONENT_MODELS: tuple[type[BaseModel], ...] = (Problem, OpenAIError)
PROBLEM = "application/problem+json"
ID_QUERY = frozenset({"at", "story_id", "card_id"})
ETAG = {"description": "the version answered, for If-Match", "schema": {"type": "string", "pattern": '^"[0-9]+"$'}}
REPLAYED = {
    "description": "true: a retry with the same Idempotency-Key, answered as the first attempt was",
    "schema": {"type": "string", "enum": ["true"]},
}
PROXY_HEADERS = {
    "X-Changji-Story": {"description": "the story the chat was read against", "schema": {"type": "string"}},
    "X-Changji-Node": {"description": "the reply recorded", "schema": {"type": "string"}},
    "X-Changji-Recorded": {"description": "whether the turn was recorded", "schema": {"enum": ["true", "false"]}},
    "X-Changji-Reason": {"description": "why nothing was recorded", "schema": {"type": "string"}},
}
ERRORS: dict[str, tuple[int, str]] = {  # component name: status, description
    "Unreadable": (400, "the request could not be read: a malformed If-Match or Idempotency-Key, a body cut off"),
    "Unauthorized": (401, "missing or unknown API key"),
    "NotFound": (404, "unknown id, or another tenant's"),
    "BodyTimeout": (408, "the body did not arrive in time (CHANGJI_BODY_SECONDS)"),
    "Conflict": (409, "a stale If-Match version, or another write changed it first"),
    "TooLarge": (413, "body too large (CHANGJI_MAX_BODY_BYTES; the import routes: CHANGJI_IMPORT_MAX_BYTES)"),
    "Invalid": (422, "validation failed, or a rule refused it; `errors` names each field"),
    "NoMainModel": (503, "no main model is configured (CHANGJI_MAIN_BASE_URL, CHANGJI_MAIN_MODEL)"),
}
OPENAI_ERRORS: dict[str, tuple[str, str]] = {  # status: component name, description
    "400": ("OpenAIUnreadable", "the body is not a chat-completions request (messages: a non-empty list of objects)"),
    "401": ("OpenAIUnauthorized", "missing or unknown API key (`undefined` too)"),
    "404": ("OpenAINotFound", "X-Changji-Story names no story of the tenant"),
    "408": ("OpenAIBodyTimeout", "the body did not arrive in time"),
    "409": ("OpenAIConflict", "another write changed the story first"),
    "413": ("OpenAITooLarge", "body too large"),
    "422": ("OpenAIInvalid", "a rule of the story refused the turn"),
    "4XX": ("OpenAIRefused", "the upstream refused the request: its own status"),
    "502": ("OpenAIUpstreamFailed", "the upstream could not be reached, failed, or refused changji's key for it"),
    "503": ("OpenAINoMainModel", "no upstream model is configured"),
    "504": ("OpenAIUpstreamTimeout", "the upstream did not answer in time"),
}


def _ref(name: str) -> dict[str, Any]:
    """The error response `name` (written out in each operation: every `$ref` points at a schema)."""
    return copy.deepcopy(ERROR_RESPONSES[name])


def _schema(model: str) -> dict[str, Any]:
    return {"schema": {"$ref": REF.format(model=model)}}


def _error_responses() -> dict[str, Any]:
    found: dict[str, Any] = {
        name: {"description": description, "content": {PROBLEM: _schema("Problem")}}
        for name, (_, description) in ERRORS.items()
    }
    found["Unauthorized"]["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
    for name, description in OPENAI_ERRORS.values():
        found[name] = {"description": description, "content": {"application/json": _schema("OpenAIError")}}
    found["OpenAIUnreadable"]["content"][PROBLEM] = _schema("Problem")  # (the HTTP parser's own, as elsewhere)
    return found


def names_ids(route: Route) -> bool:
    """Whether the route names something by id: in its path, its query or its body."""
    if re.search(r"{\w+}", route.path) or ID_QUERY & set(route.query):
        return True
    if route.request is None:
        return False
    schema = route.request.model_json_schema()
    return any("uuid" in str(field) for field in schema.get("properties", {}).values())


def reads_body(route: Route) -> bool:
    return route.request is not None or bool(route.uploads) or route.idempotent


FILE_SCHEMAS: dict[str, dict[str, Any]] = {  # a file answered: its media type, what its body is
    "application/json": {"type": "object"},
    "application/jsonl": {"type": "string"},
    "image/png": {"type": "string", "format": "binary"},
    "application/zip": {"type": "string", "format": "binary"},
}


def _success(route: Route) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": "success"}
    if route.downloads:
        answer["content"] = {media_type: {"schema": FILE_SCHEMAS[media_type]} for media_type in route.downloads}
        answer["headers"] = {"Content-Disposition": {"schema": {"type": "string"}}, "ETag": ETAG}
    elif route.response is not None and route.status != 204:
        answer["content"] = {"application/json": _schema(route.response.__name__)}
        answer["headers"] = {} if route.openai else {"ETag": ETAG}
    if route.idempotent:
        answer.setdefault("headers", {})["Idempotent-Replayed"] = REPLAYED
    if route.openai and route.method == "POST":
        answer["headers"] = PROXY_HEADERS
    if not answer.get("headers"):
        answer.pop("headers", None)
    return answer


TURN_EVENTS = ["turn", "delta", "tool", "sealed", "ask", "revised", "stopped", "error", "done"]


def _stream(route: Route) -> dict[str, Any]:
    """Server-sent events: a turn's named events with JSON data, or the upstream's chunks as it sent them
    (JSON data, then `[DONE]`)."""
    if route.openai:
        described = "the upstream's chunks as server-sent events (`stream: true`), then `data: [DONE]`"
        event: dict[str, Any] = {"type": "string"}
    else:
        described = "the turn as server-sent events (`Accept: text/event-stream`): turn, delta…, tool…, sealed"
        described += " | ask | revised | stopped | error, done"
        event = {"type": "string", "enum": TURN_EVENTS}
    schema = {"type": "object", "properties": {"event": event, "data": {"type": "string"}}, "required": ["data"]}
    return {"description": described, "content": {"text/event-stream": {"schema": schema}}}


def responses(route: Route) -> dict[str, Any]:
    answers: dict[str, Any] = {str(route.status): _success(route)}
    if route.streams:
        stream = _stream(route)
        if str(route.status) == "200":
            answers["200"]["content"] |= stream["content"]
        else:
            answers["200"] = stream
    if route.openai:
        statuses = {"400", "401", "413"} | (
            {"404", "408", "409", "422", "4XX", "502", "503", "504"} if route.method == "POST" else {"502", "503"}
        )
        for status in sorted(statuses):
            answers[status] = _ref(OPENAI_ERRORS[status][0])
        return answers
    errors = ["Unreadable", "Unauthorized", "TooLarge"]
    if names_ids(route):
        errors.append("NotFound")
    if reads_body(route):
        errors.append("BodyTimeout")
    if route.if_match or route.method != "GET":
        errors.append("Conflict")
    if route.method != "GET" or route.query or reads_body(route):
        errors.append("Invalid")
    if route.streams:
        errors.append("NoMainModel")
    for name in errors:
        answers[str(ERRORS[name][0])] = _ref(name)
    return answers


ERROR_RESPONSES = _error_responses()
