"""The scene at a node (snapshot, roster, presence), the user's edits of it, and the background jobs."""

from __future__ import annotations

from typing import Any, get_args
from uuid import UUID

from aiohttp import web

from api.errors import BadRequestError
from api.http import body, path_id, query_id, query_int, respond, service, tenant
from api.schemas import (
    EditSceneRequest,
    EditSceneResponse,
    JobListResponse,
    JobModel,
    JobStatus,
    ScenePatchModel,
    SceneResponse,
    SceneText,
)
from api.service import Service
from domain.scene import Roster, SceneSnapshot, format_roster, format_state, present


async def scene_fields(svc: Service, story_id: UUID, node_id: UUID) -> dict[str, Any]:
    scene = await svc.load(svc.scene_of, node_id)
    patches = await svc.query(svc.store.scene_patches, node_id)
    snapshot, roster = (scene.snapshot, scene.roster) if scene else (SceneSnapshot(), Roster())
    return {
        "story_id": story_id,
        "at": node_id,
        "source_node_id": scene.source_id if scene else None,
        "state": snapshot.to_dict(),
        "roster": roster.to_dict(),
        "present": [name for name in snapshot.characters if present(snapshot, name)],
        "text": SceneText(state=format_state(snapshot), roster=format_roster(roster)),
        "patches": [ScenePatchModel.model_validate(p) for p in patches],
    }


async def get_scene(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    node = await svc.load(svc.app.scene_target, tenant(request), story_id, query_id(request, "at"))
    return respond(SceneResponse(**await scene_fields(svc, story_id, node.id)))


async def edit_scene(request: web.Request) -> web.Response:
    req = await body(request, EditSceneRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    node, merged, _ = await svc.write(svc.edit_scene, tenant(request), story_id, req.at, req.patch)
    fields = await scene_fields(svc, story_id, node.id)
    return respond(EditSceneResponse(**fields, applied=merged.applied, warnings=merged.warnings))


async def list_jobs(request: web.Request) -> web.Response:
    svc = service(request)
    limit = query_int(request, "limit", 50, 1, 500)
    after = query_int(request, "cursor", 0, 0, 2**62)
    story_id = query_id(request, "story_id")
    status = request.query.get("status")
    if status is not None and status not in get_args(JobStatus):
        raise BadRequestError(422, f"status must be one of {', '.join(get_args(JobStatus))}", "query.status")
    kind = request.query.get("kind") or None
    if story_id is not None:
        await svc.load(svc.app.story, tenant(request), story_id)  # 404 for someone else's story
    rows = await svc.query(svc.store.jobs, tenant(request), after, limit, story_id, kind, status)
    next_cursor = str(rows[-1]["seq"]) if len(rows) == limit else None
    return respond(JobListResponse(items=[JobModel.model_validate(r) for r in rows], next_cursor=next_cursor))
