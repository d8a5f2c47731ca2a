"""OpenAPI links from every creating operation to the operations on what it created, by rule: what each
answer gives (a card's id, a story's with its card and leaf, a node's, a save's, a lorebook's, an entry's
uid) and what each operation takes (its path parameters, the ids in its query, the ids in its body)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from api import schemas as s
from api.routes import ROUTES, Route

GIVES: dict[type[BaseModel], dict[str, str]] = {  # a creating answer: what it gives, where in its body
    s.CardResponse: {"card_id": "/id"},
    s.MergeCardResponse: {"card_id": "/card/id"},
    s.StoryResponse: {"story_id": "/id", "card_id": "/card_id", "node_id": "/leaf_id"},
    s.ImportChatResponse: {"story_id": "/story/id", "card_id": "/story/card_id", "node_id": "/story/leaf_id"},
    s.AppendNodeResponse: {"node_id": "/node/id", "story_id": "/node/story_id"},
    s.TurnResponse: {"node_id": "/reply/id", "story_id": "/story_id"},
    s.SaveResponse: {"save_id": "/id", "worldline_id": "/worldline_id", "node_id": "/node_id"},
    s.LorebookResponse: {"lorebook_id": "/id", "card_id": "/card_id"},
    s.LoreEntryModel: {"uid": "/uid"},
}
QUERY_TAKES = {"at": "node_id", "story_id": "story_id", "card_id": "card_id"}  # a query parameter: the id it takes
BODY_TAKES = {"card_id": "card_id", "node_id": "node_id", "at": "node_id", "into": "card_id"}  # a body field: its id
BODY_LISTS = {"node_ids": "node_id"}  # a body field that lists ids: one given


def _path_names(route: Route) -> list[str]:
    return re.findall(r"{(\w+)}", route.path)


def creates(route: Route) -> bool:
    """A creating operation: a POST that answers what it made (201), or the card it merged into."""
    return (
        route.method == "POST"
        and route.response in GIVES
        and (route.status == 201 or route.response is s.MergeCardResponse)
    )


def given(route: Route) -> dict[str, str]:
    """The ids a creating operation's answer gives, as runtime expressions; its own path's ids besides."""
    assert route.response is not None
    found = {name: f"$request.path.{name}" for name in _path_names(route)}
    found |= {name: f"$response.body#{pointer}" for name, pointer in GIVES[route.response].items()}
    return found


def _body_fields(route: Route) -> set[str]:
    if route.request is None:
        return set()
    return set(route.request.model_json_schema().get("properties", {}))


def link(source: Route, target: Route) -> dict[str, Any] | None:
    """The link from `source`'s answer to `target`, when `source` gives every id `target`'s path takes and
    at least one id `target` takes at all; None otherwise."""
    ids = given(source)
    path = _path_names(target)
    if any(name not in ids for name in path):
        return None
    parameters = {f"path.{name}": ids[name] for name in path}
    parameters |= {f"query.{q}": ids[QUERY_TAKES[q]] for q in target.query if QUERY_TAKES.get(q) in ids}
    fields = _body_fields(target)
    body: dict[str, Any] = {f: ids[BODY_TAKES[f]] for f in fields if BODY_TAKES.get(f) in ids}
    body |= {f: [ids[BODY_LISTS[f]]] for f in fields if BODY_LISTS.get(f) in ids}
    if not parameters and not body:
        return None
    found: dict[str, Any] = {"operationId": target.handler.__name__}
    if parameters:
        found["parameters"] = parameters
    if body:
        found["requestBody"] = body
    return found


def links_from(route: Route) -> dict[str, Any]:
    """The links of a creating operation's answer, one per operation it reaches."""
    if not creates(route):
        return {}
    found = {}
    for target in ROUTES:
        made = link(route, target)
        if made is not None:
            found[target.handler.__name__] = made
    return found
