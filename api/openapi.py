"""OpenAPI 3.1, generated from the route table and the pydantic models."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.routes import ROUTES
from api.schemas import Problem

REF = "#/components/schemas/{model}"
QUERY_TYPES = {"limit": "integer", "from_depth": "integer", "k": "integer", "deleted": "boolean"}


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
            + [
                {"name": q, "in": "query", "required": q == "q", "schema": {"type": QUERY_TYPES.get(q, "string")}}
                for q in route.query
            ],
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
                {"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"}}
            )
            operation["responses"]["409"] = _problem("stale If-Match version, or a concurrent write")
        if route.idempotent:
            operation["parameters"].append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "maxLength": 255},
                }
            )
        if route.request is not None:
            operation["requestBody"] = {
                "required": True,
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
