"""The scene at a node (snapshot, roster, presence) and the user's edits of it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from aiohttp import web

from api.bootstrap import Service
from api.http import body, path_id, query_id, respond, service, tenant
from api.schemas.scene import EditSceneRequest, EditSceneResponse, ScenePatchModel, SceneResponse, SceneText
from domain.texts import CONTEXT_TEXTS
from domain.tree.rules.scene import Roster, SceneSnapshot, present
from projections.context.scene import format_roster, format_state


async def scene_fields(svc: Service, tenant_id: str, story_id: UUID, node_id: UUID) -> dict[str, Any]:
    story = await svc.executor.load(svc.app.story, tenant_id, story_id)
    texts = CONTEXT_TEXTS[await svc.executor.load(svc.app.language, story)]
    scene = await svc.executor.load(svc.views.scene_of, node_id)
    patches = await svc.executor.query(svc.store.scene_patches, node_id)
    snapshot, roster = (scene.snapshot, scene.roster) if scene else (SceneSnapshot(), Roster())
    return {
        "story_id": story_id,
        "at": node_id,
        "source_node_id": scene.source_id if scene else None,
        "state": snapshot.to_dict(),
        "roster": roster.to_dict(),
        "present": [name for name in snapshot.characters if present(snapshot, name)],
        "text": SceneText(state=format_state(snapshot, texts), roster=format_roster(roster, texts)),
        "patches": [ScenePatchModel.model_validate(p) for p in patches],
    }


async def get_scene(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    node = await svc.executor.load(svc.app.scenes.scene_target, tenant(request), story_id, query_id(request, "at"))
    return respond(SceneResponse(**await scene_fields(svc, tenant(request), story_id, node.id)))


async def edit_scene(request: web.Request) -> web.Response:
    req = await body(request, EditSceneRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    edited = await svc.executor.write(  # (a patch the merge rules refuse whole: a rule violated at body.patch)
        svc.app.scenes.edit_scene, tenant(request), story_id, req.at, req.patch, svc.views
    )
    fields = await scene_fields(svc, tenant(request), story_id, edited.node.id)
    return respond(EditSceneResponse(**fields, applied=edited.merged.applied, warnings=edited.merged.warnings))
