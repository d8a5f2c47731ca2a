"""OpenAPI 3.1, generated from the route table and the pydantic models: parameters and request bodies
(`api/openapi/requests.py`), every status and content type a route can answer (`api/openapi/responses.py`),
and links from what creates a card, story, node, save or lorebook to what acts on it (`api/openapi/links.py`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.openapi.links import links_from
from api.openapi.requests import REF, component_schemas, parameters, request_body
from api.openapi.responses import COMPONENT_MODELS, responses
from api.routes import ROUTES

DESCRIPTION = """场记 — a continuity engine for AI role-play.

Every route under /v1 takes `Authorization: Bearer <key>`. Errors are RFC 9457 problem+json (the
OpenAI-compatible routes answer OpenAI's error shape instead). Any request the HTTP parser cannot read
is a 400, a header past 8,190 bytes a 431, a method a path does not take a 405 with `Allow`."""


def build_openapi(version: str) -> dict[str, Any]:
    models: set[type[BaseModel]] = set(COMPONENT_MODELS)
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
            "parameters": parameters(route),
            "responses": responses(route),
        }
        body = request_body(route)
        if body is not None:
            operation["requestBody"] = body
        links = links_from(route)
        if links:
            operation["responses"][str(route.status)]["links"] = links
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "changji", "version": version, "description": DESCRIPTION},
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}) | component_schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
