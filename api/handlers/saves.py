"""Save points and world lines: mark, list (grouped by line), restore, delete, rename a line."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from aiohttp import web

from api.bootstrap import Service
from api.http import body, keyed, new_id, path_id, respond, service, tenant
from api.schemas.stories import CreateSaveRequest, RenameWorldLineRequest, SaveResponse, SavesResponse, WorldLineModel
from domain.tree.story import Story
from domain.values import SavePoint


def _save_model(story: Story, save: SavePoint, on_path: bool) -> SaveResponse:
    return SaveResponse(
        id=save.id,
        name=save.name,
        node_id=save.node_id,
        worldline_id=save.worldline_id,
        worldline_name=story.worldline_name(save),
        parent_save_id=save.parent_save_id,
        fork_from_save_id=save.fork_from_save_id,
        on_current_path=on_path,
        created_at=save.created_at,
    )


async def _saves(svc: Service, tenant_id: str, story_id: UUID) -> SavesResponse:
    story = await svc.executor.load(svc.app.story, tenant_id, story_id)
    assert story.leaf_id is not None
    leaf = story.leaf_id
    saves = sorted(story.saves.values(), key=lambda s: s.created_at)
    shallowest = await svc.executor.load(lambda: min((svc.app.node(s.node_id).depth for s in saves), default=0))
    path = await svc.executor.query(svc.store.path_ids, leaf, shallowest)
    models = [_save_model(story, s, s.node_id in path) for s in saves]
    lines: dict[str, WorldLineModel] = {}
    for model in models:
        line = lines.setdefault(
            model.worldline_id, WorldLineModel(id=model.worldline_id, name=model.worldline_name, saves=[])
        )
        line.saves.append(model)
    ordered = sorted(
        lines.values(), key=lambda line: (line.saves[0].fork_from_save_id is not None, line.saves[0].created_at)
    )
    current = next((m.id for m in reversed(models) if m.on_current_path), None)
    return SavesResponse(story_id=story_id, current_save_id=current, worldlines=ordered)


async def list_saves(request: web.Request) -> web.Response:
    svc = service(request)
    return respond(await _saves(svc, tenant(request), path_id(request, "story_id")))


async def create_save(request: web.Request) -> web.Response:
    req = await body(request, CreateSaveRequest, optional=True)
    svc, story_id = service(request), path_id(request, "story_id")
    name = req.name or datetime.now(UTC).strftime("存档 %m/%d %H:%M")
    save_id = new_id(request, "save").hex[:16]
    story = await svc.executor.load(svc.app.story, tenant(request), story_id)
    save = story.saves.get(save_id) if keyed(request) else None  # (made: a retry whose answer was lost)
    if save is None:
        written = await svc.executor.write(
            svc.app.saves.mark_save, tenant(request), story_id, save_id, name, req.node_id, svc.store
        )
        save = written.value
    story = await svc.executor.load(svc.app.story, tenant(request), story_id)
    assert story.leaf_id is not None
    on_path = await svc.executor.query(svc.store.is_ancestor, save.node_id, story.leaf_id)
    return respond(_save_model(story, save, on_path), 201, story.version)


async def restore_save(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    await svc.executor.write(svc.app.saves.restore_save, tenant(request), story_id, request.match_info["save_id"])
    return respond(await _saves(svc, tenant(request), story_id))


async def delete_save(request: web.Request) -> web.Response:
    svc = service(request)
    story_id, save_id = path_id(request, "story_id"), request.match_info["save_id"]
    await svc.executor.write(svc.app.saves.delete_save, tenant(request), story_id, save_id)
    return web.Response(status=204)


async def rename_worldline(request: web.Request) -> web.Response:
    req = await body(request, RenameWorldLineRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    worldline_id = request.match_info["worldline_id"]
    await svc.executor.write(svc.app.saves.rename_worldline, tenant(request), story_id, worldline_id, req.name)
    return respond(await _saves(svc, tenant(request), story_id))
