"""Background jobs and their outcomes."""

from __future__ import annotations

from typing import get_args

from aiohttp import web

from api.errors import BadRequestError
from api.http import query_id, query_int, respond, service, tenant
from api.schemas import JobListResponse, JobModel
from domain.values import JobState


async def list_jobs(request: web.Request) -> web.Response:
    svc = service(request)
    limit = query_int(request, "limit", 50, 1, 500)
    after = query_int(request, "cursor", 0, 0, 2**62)
    story_id = query_id(request, "story_id")
    status = request.query.get("status")
    if status is not None and status not in get_args(JobState):
        raise BadRequestError(422, f"status must be one of {', '.join(get_args(JobState))}", "query.status")
    kind = request.query.get("kind") or None
    if story_id is not None:
        await svc.executor.load(svc.app.story, tenant(request), story_id)  # 404 for someone else's story
    rows = await svc.executor.query(svc.store.jobs, tenant(request), after, limit, story_id, kind, status)
    next_cursor = str(rows[-1]["seq"]) if len(rows) == limit else None
    return respond(JobListResponse(items=[JobModel.model_validate(r) for r in rows], next_cursor=next_cursor))
