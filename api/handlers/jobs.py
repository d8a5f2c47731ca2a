"""Background jobs and their outcomes."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, cast, get_args
from uuid import UUID

from aiohttp import web

from api.errors import BadRequestError
from api.http import path_id, query_id, query_int, respond, service, tenant
from api.schemas.scene import JobListResponse, JobModel, JobStatus, StoryJobsResponse
from domain.errors import NotFoundError
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
    shown = (_shown(row, svc.jobs.running) for row in rows)
    items = [job for job in shown if statuses is None or job.status in statuses]
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


def _job_id(request: web.Request) -> tuple[JobKind, UUID]:
    """`<kind>:<node id>` from the path; a malformed one names no job (404)."""
    job_id = request.match_info["job_id"]
    kind, _, node = job_id.partition(":")
    try:
        node_id = UUID(node)
    except ValueError:
        node_id = None
    if kind not in get_args(JobKind) or node_id is None:
        raise NotFoundError(f"job {job_id} not found (a job id is `<kind>:<node id>`)")
    return cast(JobKind, kind), node_id


def _shown(row: dict[str, Any], running: Collection[str]) -> JobModel:
    """A job as recorded; a due one this process is running shows as running."""
    return JobModel.model_validate(
        {**row, "status": "running"} if row["status"] in DUE and row["id"] in running else row
    )


async def retry_job(request: web.Request) -> web.Response:
    """Do a failed or skipped job again: it is due now, its attempts counted afresh (422 for a job that
    is still due or is done)."""
    svc = service(request)
    kind, node_id = _job_id(request)
    await svc.executor.write(svc.app.jobs.retry_job, tenant(request), node_id, kind)
    row = await svc.executor.query(svc.store.job, tenant(request), f"{kind}:{node_id}")
    if row is None:  # (the node's story was deleted in between)
        raise NotFoundError(f"job {kind}:{node_id} not found")
    return respond(_shown(row, svc.jobs.running), status=202)
