"""OpenAPI 3.1, generated from the route table and the pydantic models."""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.routes import ROUTES
from api.schemas import JobStatus, Problem
from domain.values import JobKind

REF = "#/components/schemas/{model}"
UUID_SCHEMA = {"type": "string", "format": "uuid"}
QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "limit": {"type": "integer"},
    "cursor": {"type": "integer", "description": "the `next_cursor` of the page before"},
    "from_depth": {"type": "integer"},
    "k": {"type": "integer"},
    "deleted": {"type": "boolean"},
    "at": UUID_SCHEMA | {"description": "a node of the story (default: its leaf)"},
    "story_id": UUID_SCHEMA,
    "card_id": UUID_SCHEMA,
    "q": {"type": "string"},
    "kind": {"type": "string", "enum": list(get_args(JobKind))},
    "status": {
        "type": "string",
        "description": "one or more of " + ", ".join(get_args(JobStatus)) + " (comma-separated, or repeated)",
    },
}


def _query(name: str, ranges: dict[str, tuple[int, int]]) -> dict[str, Any]:
    schema = dict(QUERY_SCHEMAS.get(name, {"type": "string"}))
    if name in ranges:
        low, high = ranges[name]
        bounds = ("minLength", "maxLength") if schema.get("type") == "string" else ("minimum", "maximum")
        schema |= dict(zip(bounds, (low, high), strict=True))
    return {"name": name, "in": "query", "required": name == "q", "schema": schema}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": REF.format(model="Problem")}}},
    }


def build_openapi(version: str) -> dict[str, Any]:
    models: set[type[BaseModel]] = {Problem}
    for route in ROUTES:
        models.update(m for m in (route.request, route.response) if m is not None)
    _, defs = models_json_schema(
        [(m, "validation") for m in sorted(models, key=lambda m: m.__name__)], ref_template=REF
    )
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        operation: dict[str, Any] = {
            "summary": route.summary,
            "operationId": route.handler.__name__,
            "security": [{"bearer": []}],
            "parameters": [
                {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                for name in re.findall(r"{(\w+)}", route.path)
            ]
            + [_query(q, {name: (low, high) for name, low, high in route.ranges}) for q in route.query],
            "responses": {
                str(route.status): {"description": "success"}
                | (
                    {"content": {"application/json": {"schema": {"$ref": REF.format(model=route.response.__name__)}}}}
                    if route.response and route.status != 204
                    else {}
                ),
                "401": _problem("missing or unknown API key"),
                "404": _problem("unknown id, or another tenant's"),
                "413": _problem("body too large"),
                "422": _problem("validation failed; `errors` names each field"),
            },
        }
        if route.if_match:
            operation["parameters"].append(
                {
                    "name": "If-Match",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "description": 'the ETag of the version read, such as "7"'},
                }
            )
            operation["responses"]["409"] = _problem("stale If-Match version, or a concurrent write")
            operation["responses"]["400"] = _problem("malformed If-Match")
        if route.idempotent:
            operation["parameters"].append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
                }
            )
            operation["responses"]["400"] = _problem("malformed If-Match or Idempotency-Key")
        if route.request is not None:
            operation["requestBody"] = {
                "required": not route.body_optional,
                "content": {"application/json": {"schema": {"$ref": REF.format(model=route.request.__name__)}}},
            }
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "changji", "version": version, "description": "场记 — a continuity engine for AI role-play"},
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
