"""What a route takes: its path, query and header parameters, and its request body — a JSON model, or a
file (raw, or the file of a multipart/form-data form)."""

from __future__ import annotations

import re
from typing import Any, get_args

from api.http import IDEMPOTENCY_KEY_PATTERN, IF_MATCH_PATTERN
from api.routes import Route
from api.schemas.scene import JobStatus
from domain.values import CardData, JobKind

REF = "#/components/schemas/{model}"
UUID_SCHEMA: dict[str, Any] = {"type": "string", "format": "uuid"}
SPACES = r"\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""What `str.strip()` strips, spelled out: JSON Schema's `\\s` is ECMAScript's (no U+0085, but U+FEFF)."""
TEXT = {"type": "string", "pattern": f"[^{SPACES}]", "description": "not only spaces (it is stripped)"}
STATUSES = "|".join(get_args(JobStatus))
QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "limit": {"type": "integer"},
    "cursor": {"type": "integer", "description": "the `next_cursor` of the page before"},
    "from_depth": {"type": "integer"},
    "k": {"type": "integer"},
    "deleted": {"type": "boolean"},
    "at": UUID_SCHEMA | {"description": "a node of the story (default: its leaf)"},
    "story_id": UUID_SCHEMA,
    "card_id": UUID_SCHEMA,
    "q": TEXT,
    "kind": {"type": "string", "enum": list(get_args(JobKind))},
    "status": {
        "type": "string",
        "pattern": f"^ *({STATUSES})? *(, *({STATUSES})? *)*$",
        "description": "one or more of " + ", ".join(get_args(JobStatus)) + " (comma-separated, or repeated)",
    },
    "name": {"type": "string", "description": "the lorebook's name when the file names none (200 characters kept)"},
    "title": {"type": "string", "description": "the story's title (200 characters kept)"},
}
PATH_SCHEMAS: dict[str, dict[str, Any]] = {
    "card_id": UUID_SCHEMA,
    "story_id": UUID_SCHEMA,
    "node_id": UUID_SCHEMA,
    "lorebook_id": UUID_SCHEMA,
    "uid": {"type": "integer", "minimum": 0, "maximum": 2**53},
    "save_id": {"type": "string", "description": "a save point's id, as listed"},
    "worldline_id": {"type": "string", "description": "a world line's id, as listed"},
    "item_id": {"type": "string", "description": "a card memory's handbook item, as listed"},
}
EMBEDDED_BOOK = {
    "anyOf": [UUID_SCHEMA, {"type": "string", "enum": ["embedded"]}],
    "description": "an attached lorebook, or `embedded`: the card's own",
}


def _query(route: Route, name: str) -> dict[str, Any]:
    schema = dict(QUERY_SCHEMAS.get(name, {"type": "string"}))
    ranges = {q: (low, high) for q, low, high in route.ranges}
    if name in ranges:
        low, high = ranges[name]
        bounds = ("minLength", "maxLength") if schema.get("type") == "string" else ("minimum", "maximum")
        schema |= dict(zip(bounds, (low, high), strict=True))
    choices = dict(route.choices)
    if name in choices:
        schema = {"type": "string", "enum": list(choices[name])}
    return {"name": name, "in": "query", "required": name == "q" or name in route.required, "schema": schema}


def _path(route: Route, name: str) -> dict[str, Any]:
    schema = PATH_SCHEMAS.get(name, {"type": "string"})
    if name == "lorebook_id" and route.method == "GET":  # (the embedded lorebook is read, never changed here)
        schema = EMBEDDED_BOOK
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _header(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": False, "schema": schema, "description": description}


def parameters(route: Route) -> list[dict[str, Any]]:
    found = [_path(route, name) for name in re.findall(r"{(\w+)}", route.path)]
    found += [_query(route, name) for name in route.query]
    if route.if_match:
        tag: dict[str, Any] = {"type": "string", "pattern": f"^(?:{IF_MATCH_PATTERN})$"}
        found.append(_header("If-Match", tag, 'the ETag of the version read, such as "7" (a stale one is 409)'))
    if route.idempotent:
        key: dict[str, Any] = {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": f"^{IDEMPOTENCY_KEY_PATTERN}$",
        }
        found.append(_header("Idempotency-Key", key, "a retry with the same key gets the stored answer"))
    if route.openai and route.method == "POST":
        found.append(_header("X-Changji-Story", UUID_SCHEMA, "the story to continue (default: found by the chat)"))
    return found


UPLOAD_SCHEMAS = {
    "application/json": {"/v1/cards/import": "CardFile", "/v1/cards/{card_id}/lorebooks": "WorldInfoFile"},
}
BINARY = {"type": "string", "format": "binary"}
UPLOAD_EXAMPLES: dict[str, dict[str, Any]] = {
    "/v1/cards/import": {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "沈砚", "first_mes": "门被风撞开……", "tags": ["灯塔"]},
    },
    "/v1/cards/{card_id}/lorebooks": {
        "name": "灯塔",
        "entries": {"0": {"uid": 0, "key": ["灯塔"], "content": "灯塔在岬角尽头。", "comment": "灯塔"}},
    },
}


def _upload(route: Route, media_type: str) -> dict[str, Any]:
    if media_type == "application/jsonl":
        return {"schema": {"type": "string", "description": "a SillyTavern chat: a header line, then a line a message"}}
    model = UPLOAD_SCHEMAS.get(media_type, {}).get(route.path)
    if model is None:
        return {"schema": BINARY}
    return {"schema": {"$ref": REF.format(model=model)}, "example": UPLOAD_EXAMPLES[route.path]}


def request_body(route: Route) -> dict[str, Any] | None:
    if route.uploads:
        content = {media_type: _upload(route, media_type) for media_type in route.uploads}
        return {
            "required": True,
            "description": "the file as the body, or as the file part of a multipart/form-data form (the part with a"
            " filename, or the only part); what it holds is checked by reading it (422 naming the field at fault)",
            "content": content,
        }
    if route.request is None:
        return None
    return {
        "required": not route.body_optional,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=route.request.__name__)}}},
    }


def _card_fields() -> dict[str, Any]:
    """A card file's `data`: the card's fields as POST /v1/cards takes them, a name that is not only spaces,
    and an embedded lorebook (`character_book`: an object with a list of entries, or null)."""
    schema = CardData.model_json_schema()
    schema["properties"]["name"] |= {"pattern": TEXT["pattern"]}
    schema["properties"]["character_book"] = {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "name": _nullable({"type": "string"}),
                    "scan_depth": _nullable({"type": "integer", "minimum": 0, "maximum": 1000}),
                    "recursive_scanning": _nullable({"type": "boolean"}),
                    "entries": {"type": "array", "items": CARD_BOOK_ENTRY, "maxItems": 10_000},
                },
                "required": ["entries"],
            },
            {"type": "null"},
        ],
        "description": "the card's own lorebook (Character Card V2 `character_book`)",
    }
    schema["required"] = ["name"]
    schema.pop("title", None)
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


STRINGS = {"type": "array", "items": {"type": "string"}, "maxItems": 200}
WORLD_INFO_ENTRY = {
    "type": "object",
    "description": "an entry as SillyTavern writes it; other fields are kept in its extensions",
    "properties": {
        "uid": {"description": "its uid (default: its key in entries when a number, else its place)"},
        "key": _nullable(STRINGS),
        "keysecondary": _nullable(STRINGS),
        "comment": _nullable({"type": "string", "maxLength": 500}),
        "content": _nullable({"type": "string", "maxLength": 100_000}),
        **{name: _nullable({"type": "boolean"}) for name in ("constant", "disable", "selective")},
        **{name: _nullable({"type": "boolean"}) for name in ("caseSensitive", "matchWholeWords")},
        "selectiveLogic": _nullable({"type": "integer", "minimum": 0, "maximum": 3}),
        "order": _nullable({"type": "integer", "minimum": -(2**31), "maximum": 2**31}),
        "position": _nullable({"type": "integer"}),
        "scanDepth": _nullable({"type": "integer", "minimum": 0, "maximum": 1000}),
    },
}


CARD_BOOK_ENTRY = {
    "type": "object",
    "description": "an entry of a card's `character_book` (V2/V3); other fields are kept in its extensions",
    "properties": {
        "keys": _nullable(STRINGS),
        "secondary_keys": _nullable(STRINGS),
        "comment": _nullable({"type": "string", "maxLength": 500}),
        "name": _nullable({"type": "string", "description": "the title when there is no comment (500 at most)"}),
        "content": _nullable({"type": "string", "maxLength": 100_000}),
        **{name: _nullable({"type": "boolean"}) for name in ("constant", "enabled", "selective")},
        **{name: _nullable({"type": "boolean"}) for name in ("case_sensitive", "use_regex")},
        "insertion_order": _nullable({"type": "integer", "minimum": -(2**31), "maximum": 2**31}),
        "position": _nullable({"enum": ["", "before_char", "after_char"]}),
        "extensions": _nullable(
            {
                "type": "object",
                "properties": {
                    **{name: _nullable({"type": "boolean"}) for name in ("case_sensitive", "match_whole_words")},
                    "selectiveLogic": _nullable({"type": "integer", "minimum": 0, "maximum": 3}),
                    "position": _nullable({"type": "integer"}),
                    "scan_depth": _nullable({"type": "integer", "minimum": 0, "maximum": 1000}),
                },
            }
        ),
    },
}


def component_schemas() -> dict[str, Any]:
    """The file forms documented by schema: card JSON (a V2 or V3 envelope, or a V1 flat card) and
    SillyTavern's World Info."""
    return {
        "CardFields": _card_fields(),
        "CardFile": {
            "description": "card JSON: a V2/V3 envelope (`spec`, `spec_version`, `data`), or a V1 flat card",
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "spec": {"description": "chara_card_v2 or chara_card_v3 (another: read as V2 by its data)"},
                        "spec_version": {"description": "2.0 or 3.0 (another is read all the same, with a warning)"},
                        "data": {"$ref": REF.format(model="CardFields")},
                    },
                    "required": ["data"],
                },
                {"$ref": REF.format(model="CardFields")},
            ],
        },
        "WorldInfoFile": {
            "description": "SillyTavern's World Info: its entries by uid (a V3 `lorebook_v3`, or a card whose"
            " `character_book` it takes, are read too)",
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"]},
                "entries": {"type": "object", "additionalProperties": WORLD_INFO_ENTRY, "maxProperties": 10_000},
            },
            "required": ["entries"],
        },
    }
