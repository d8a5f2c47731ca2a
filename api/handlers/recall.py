"""Recall seen from outside: what the archive finds for a query on a path, and how far its index is."""

from __future__ import annotations

from uuid import UUID

from aiohttp import web

from api.http import path_id, query_id, query_int, query_text, respond, service, tenant
from api.schemas.context import FoundBy, IndexResponse, RecallHitModel, RecallResponse

MAX_QUERY = 500


async def recall(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    await svc.executor.load(svc.app.story, tenant(request), story_id)  # 404 for someone else's story first
    query = query_text(request, "q", MAX_QUERY)
    k = query_int(request, "k", 10, 1, 50)
    at = query_id(request, "at")
    await svc.recall.refresh(story_id)  # whatever was written before this request is searched
    await svc.recall.prepare(story_id, query)
    hits = await svc.executor.load(svc.views.recall_at, tenant(request), story_id, query, k, at)
    models = [
        RecallHitModel(
            passage_id=hit.row["id"], kind="episode" if hit.episode else "turn", node_id=UUID(hit.row["node_id"]),
            user_id=UUID(hit.row["user_id"]), turn=hit.row["turn"], first_turn=hit.row["first_turn"],
            depth=hit.row["depth"], text=hit.row["text"], user_part=hit.row["user_part"],
            hidden=hit.hidden, score=round(hit.score, 6),
            found_by={name: FoundBy(rank=rank, score=round(score, 6)) for name, (rank, score) in hit.found_by.items()},
        )
        for hit in hits
    ]  # fmt: skip
    return respond(RecallResponse(story_id=story_id, query=query, at=at, hits=models))


async def index(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    await svc.executor.load(svc.app.story, tenant(request), story_id)
    state = await svc.executor.query(svc.recall.state, story_id)
    return respond(
        IndexResponse(
            story_id=story_id, passages=state.passages, summary_passages=state.summary_passages,
            dense=state.dense, dense_passages=state.dense_passages, index_seq=state.index_seq, archive_seq=state.archive_seq,
            behind=state.index_seq < state.archive_seq, embedder=state.embedder, building=state.building,
        )
    )  # fmt: skip
