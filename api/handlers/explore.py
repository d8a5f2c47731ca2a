"""Looking back: full-text search over a story's nodes, and replay of a path step by step."""

from __future__ import annotations

from aiohttp import web

from api.http import path_id, query_id, query_int, query_text, respond, service, tenant
from api.schemas.stories import ReplayResponse, ReplayStep, SearchHitModel, SearchResponse


async def search(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    query = query_text(request, "q", 200)
    limit = query_int(request, "limit", 20, 1, 200)
    await svc.executor.load(svc.app.story, tenant(request), story_id)
    await svc.read_side.searchable()
    hits = await svc.executor.query(svc.store.search, story_id, query, limit)
    models = [SearchHitModel.model_validate(h, from_attributes=True) for h in hits]
    return respond(SearchResponse(story_id=story_id, query=query, hits=models))


async def replay(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    from_depth = query_int(request, "from_depth", 0, 0, 2**31)
    limit = query_int(request, "limit", 50, 1, 100)
    replayed = await svc.executor.load(
        svc.views.replay, tenant(request), story_id, query_id(request, "at"), from_depth, limit
    )
    steps = [ReplayStep.model_validate(s) for s in replayed.steps]
    return respond(ReplayResponse(story_id=story_id, at=replayed.end_id, steps=steps, next_depth=replayed.next_depth))
