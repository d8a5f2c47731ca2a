"""Stories: create from a card, read, list, configure, delete; the leaf (checkout); tree, path, context."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.bootstrap import Service
from api.http import (
    body,
    if_match,
    json_bytes,
    keyed,
    new_id,
    path_id,
    query_bool,
    query_id,
    query_int,
    respond,
    service,
    tenant,
)
from api.schemas.nodes import CheckoutRequest, LeafResponse, NodeResponse, PathResponse
from api.schemas.stories import CreateStoryRequest, StoryListResponse, StoryResponse, StorySummary, UpdateStoryRequest
from domain.tree.story import Story


async def story_response(svc: Service, story: Story) -> StoryResponse:
    settings = await svc.executor.load(svc.app.settings, story)
    assert story.card_id and story.root_id and story.leaf_id
    return StoryResponse(
        id=story.id,
        version=story.version,
        card_id=story.card_id,
        title=story.title,
        root_id=story.root_id,
        leaf_id=story.leaf_id,
        settings=settings.model_dump(),
        overrides=dict(story.settings),
        carried_from=story.prelude.from_story_id if story.prelude is not None else None,
        saves=len(story.saves),
        relayed=await svc.executor.query(svc.store.relayed, story.id),
        created_at=story.created_on,
        updated_at=story.modified_on,
    )


async def create_story(request: web.Request) -> web.Response:
    req = await body(request, CreateStoryRequest)
    svc, story_id = service(request), new_id(request, "story")
    if not (keyed(request) and await svc.executor.load(svc.app.exists, Story, story_id)):  # (made: answer was lost)
        await svc.executor.write(
            svc.app.stories.start_story, story_id, new_id(request, "root"), tenant(request), req.card_id,
            req.greeting_index, req.title, req.settings.given(), req.carry_from,
        )  # fmt: skip
    story = await svc.executor.load(svc.app.story, tenant(request), story_id)
    return respond(await story_response(svc, story), 201, story.version)


async def get_story(request: web.Request) -> web.Response:
    svc = service(request)
    story = await svc.executor.load(svc.app.story, tenant(request), path_id(request, "story_id"))
    return respond(await story_response(svc, story), version=story.version)


async def list_stories(request: web.Request) -> web.Response:
    svc = service(request)
    limit = query_int(request, "limit", 50, 1, 500)
    after = query_int(request, "cursor", 0, 0, 2**62)
    card_id = query_id(request, "card_id")
    deleted = query_bool(request, "deleted")
    where = {"card_id": str(card_id)} if card_id else {}
    rows = await svc.executor.query(
        svc.store.list_rows, "stories", tenant(request), after, limit, deleted=int(deleted), **where
    )
    next_cursor = str(rows[-1]["seq"]) if len(rows) == limit else None
    shown = await svc.executor.query(svc.store.stories_shown, [str(r["id"]) for r in rows])
    items = [StorySummary.model_validate({**r, **shown.get(str(r["id"]), {})}) for r in rows]
    return respond(StoryListResponse(items=items, next_cursor=next_cursor))


async def update_story(request: web.Request) -> web.Response:
    req = await body(request, UpdateStoryRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    overrides = req.settings.given() if req.settings else {}
    await svc.executor.write(svc.app.stories.configure_story, tenant(request), story_id, overrides, req.title)
    story = await svc.executor.load(svc.app.story, tenant(request), story_id)
    return respond(await story_response(svc, story), version=story.version)


async def delete_story(request: web.Request) -> web.Response:
    svc = service(request)
    story_id = path_id(request, "story_id")
    await svc.executor.write(svc.app.stories.delete_story, tenant(request), story_id, if_match(request))
    svc.recall.forget(story_id)
    return web.Response(status=204)


async def restore_story(request: web.Request) -> web.Response:
    """A deleted story back as it was (one that is not deleted is answered as it stands)."""
    svc, story_id = service(request), path_id(request, "story_id")
    await svc.executor.write(svc.app.stories.restore_story, tenant(request), story_id, if_match(request))
    story = await svc.executor.load(svc.app.story, tenant(request), story_id)
    return respond(await story_response(svc, story), version=story.version)


async def checkout(request: web.Request) -> web.Response:
    req = await body(request, CheckoutRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    moved = await svc.executor.write(
        svc.app.stories.move_leaf, tenant(request), story_id, req.node_id, if_match(request)
    )
    leaf_id, version = moved.value  # as this checkout left the story, whoever moved it since
    return respond(LeafResponse(story_id=story_id, leaf_id=leaf_id, story_version=version), version=version)


async def tree(request: web.Request) -> web.Response:
    """Encoded straight from the read model's rows (a `TreeResponse` in the schema): a story of 10,000
    turns is 20,000 nodes, which the web page's tree view reads whole; validating each row into a model
    cost a third of the answer's time."""
    svc, story_id = service(request), path_id(request, "story_id")
    story = await svc.executor.load(svc.app.story, tenant(request), story_id)
    limit = query_int(request, "limit", 500, 1, 5000)
    after = query_int(request, "cursor", 0, 0, 2**62)
    rows = await svc.executor.query(svc.store.story_nodes, story_id, after, limit)
    assert story.leaf_id is not None
    payload = {
        "story_id": story_id,
        "leaf_id": story.leaf_id,
        "nodes": [tree_node(row) for row in rows],
        "next_cursor": str(rows[-1]["seq"]) if len(rows) == limit else None,
    }
    return web.Response(body=json_bytes(payload), content_type="application/json", charset="utf-8")


def tree_node(row: dict[str, Any]) -> dict[str, Any]:
    """A `nodes` row as `TreeNode` encodes it (booleans as such, a UTC time ending in `Z`)."""
    created = row["created_at"]
    return {
        "id": row["id"], "parent_id": row["parent_id"], "kind": row["kind"], "phase": row["phase"],
        "depth": row["depth"], "turn": row["turn"], "hidden": bool(row["hidden"]), "starred": bool(row["starred"]),
        "revisions": row["revisions"], "chars": row["chars"], "preview": row["preview"] or "",
        "created_at": created[:-6] + "Z" if created.endswith("+00:00") else created,
    }  # fmt: skip


async def path(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    limit = query_int(request, "limit", 200, 1, 10_000)
    nodes = await svc.executor.load(svc.views.path, tenant(request), story_id, query_id(request, "at"), limit + 1)
    truncated = len(nodes) > limit
    nodes = nodes[-limit:]
    return respond(
        PathResponse(
            story_id=story_id, leaf_id=nodes[-1].id, nodes=[NodeResponse.of(n) for n in nodes], truncated=truncated
        )
    )


async def context(request: web.Request) -> web.Response:
    """Encoded straight from the projection's records: the hottest read (a `ContextResponse` in the schema).
    The messages go to orjson as dicts: a slotted dataclass costs it about 0.7 µs more per object,
    0.3 ms of a 460-message context."""
    svc, story_id, at = service(request), path_id(request, "story_id"), query_id(request, "at")
    if svc.recall.embedder is not None:  # embed the user's words here, not on the writer thread
        words = await svc.executor.short_load(svc.views.recall_query, tenant(request), story_id, at)
        if words:
            await svc.recall.prepare(story_id, words)
    load = svc.executor.short_load if svc.views.warm(story_id) else svc.executor.load  # (a cold one: off the loop)
    ctx = await load(svc.views.context, tenant(request), story_id, at)
    payload = {
        "story_id": story_id,
        "leaf_id": ctx.leaf_id,
        "messages": [{"role": m.role, "content": m.content} for m in ctx.messages],  # (see below)
        "explain": ctx.explain,
        "tokens": ctx.tokens,
        "budget": ctx.budget,
        "cut_turns": ctx.cut_turns,
        "cut_nodes": ctx.cut_nodes,
        "language": ctx.language,
        "token_counter": svc.counter.name,
    }
    return web.Response(body=json_bytes(payload), content_type="application/json", charset="utf-8")
