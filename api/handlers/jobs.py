"""Background jobs and their outcomes."""

from __future__ import annotations

from typing import get_args

from aiohttp import web

from api.errors import BadRequestError
from api.http import path_id, query_id, query_int, respond, service, tenant
from api.schemas.scene import JobListResponse, JobModel, JobStatus, StoryJobsResponse
from domain.values import JobKind

STATUSES = get_args(JobStatus)
DUE = ("pending", "retrying")


def _statuses(request: web.Request) -> set[str] | None:
    """`status`, repeated or comma-separated (None: any)."""
    parts = (part.strip(" ") for value in request.query.getall("status", []) for part in value.split(","))
    asked = {part for part in parts if part}
    unknown = asked - set(STATUSES)
    if unknown:
        raise BadRequestError(422, f"status must be among {', '.join(STATUSES)}", "query.status")
    return asked or None


async def list_jobs(request: web.Request) -> web.Response:
    svc = service(request)
    limit = query_int(request, "limit", 50, 1, 500)
    after = query_int(request, "cursor", 0, 0, 2**62)
    story_id = query_id(request, "story_id")
    statuses = _statuses(request)
    kind = request.query.get("kind")
    if kind is not None and kind not in get_args(JobKind):
        raise BadRequestError(422, f"kind must be one of {', '.join(get_args(JobKind))}", "query.kind")
    if story_id is not None:
        await svc.executor.load(svc.app.story, tenant(request), story_id)  # 404 for someone else's story
    stored = (
        None if statuses is None else sorted({*statuses, *DUE} - {"running"} if "running" in statuses else statuses)
    )
    rows = await svc.executor.query(svc.store.jobs, tenant(request), after, limit, story_id, kind, stored)
    running = svc.jobs.running
    items = []
    for row in rows:  # a due job this process is running shows as running
        shown = {**row, "status": "running"} if row["status"] in DUE and row["id"] in running else row
        if statuses is None or shown["status"] in statuses:
            items.append(JobModel.model_validate(shown))
    next_cursor = str(rows[-1]["seq"]) if len(rows) == limit else None
    return respond(JobListResponse(items=items, next_cursor=next_cursor))


async def story_jobs(request: web.Request) -> web.Response:
    """A story's background work at a glance: counts by status, and whether all of it is settled."""
    svc, story_id = service(request), path_id(request, "story_id")
    await svc.executor.load(svc.app.story, tenant(request), story_id)
    counts, due = await svc.executor.query(svc.store.job_counts, story_id)
    shown = {status: counts.get(status, 0) for status in STATUSES}
    for job_id, status in due:  # a running job is recorded as pending or retrying: counted as running
        if job_id in svc.jobs.running:
            shown[status] -= 1
            shown["running"] += 1
    settled = not (shown["pending"] or shown["retrying"] or shown["running"])
    return respond(StoryJobsResponse(story_id=story_id, counts=shown, settled=settled))
