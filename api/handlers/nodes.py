"""Nodes: append (user words, a reply, a regenerate), read, children and siblings, annotations."""

from __future__ import annotations

from uuid import UUID

from aiohttp import web

from api.http import body, if_match, path_id, respond, service, tenant
from api.schemas import (
    AppendNodeRequest,
    AppendNodeResponse,
    NodeIdsRequest,
    NodeIdsResponse,
    NodeListResponse,
    NodeResponse,
    ReviseRequest,
)


async def append_node(request: web.Request) -> web.Response:
    req = await body(request, AppendNodeRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    node, version, _ = await svc.write(
        svc.append, tenant(request), story_id, req.kind, req.text, req.parent_id, if_match(request)
    )
    siblings = await svc.query(svc.store.children, node.parent_id) if node.kind == "reply" else []
    answer = AppendNodeResponse(node=NodeResponse.of(node), story_version=version, regenerated=len(siblings) > 1)
    return respond(answer, 201, version)


async def get_node(request: web.Request) -> web.Response:
    svc = service(request)
    _, node = await svc.load(svc.app.owned_node, tenant(request), path_id(request, "node_id"))
    return respond(NodeResponse.of(node.view), version=node.version)


async def _nodes(request: web.Request, of_parent: bool) -> web.Response:
    svc = service(request)
    _, node = await svc.load(svc.app.owned_node, tenant(request), path_id(request, "node_id"))
    parent = node.id if of_parent else node.parent_id
    rows = await svc.query(svc.store.children, parent) if parent else [{"id": str(node.id)}]
    views = [await svc.load(svc.app.node, UUID(r["id"])) for r in rows]
    return respond(NodeListResponse(nodes=[NodeResponse.of(v) for v in views]))


async def children(request: web.Request) -> web.Response:
    return await _nodes(request, of_parent=True)


async def siblings(request: web.Request) -> web.Response:
    """The node and its siblings (swipes), oldest first."""
    return await _nodes(request, of_parent=False)


async def _annotate(request: web.Request, action: str, *args: str) -> web.Response:
    svc = service(request)
    node, _ = await svc.write(svc.app.annotate, tenant(request), path_id(request, "node_id"), action, *args)
    return respond(NodeResponse.of(node), version=node.version)


async def star(request: web.Request) -> web.Response:
    return await _annotate(request, "star")


async def unstar(request: web.Request) -> web.Response:
    return await _annotate(request, "unstar")


async def hide(request: web.Request) -> web.Response:
    return await _annotate(request, "hide")


async def unhide(request: web.Request) -> web.Response:
    return await _annotate(request, "unhide")


async def revise(request: web.Request) -> web.Response:
    req = await body(request, ReviseRequest)
    return await _annotate(request, "revise", req.text, req.reason)


async def _annotate_many(request: web.Request, action: str) -> web.Response:
    req = await body(request, NodeIdsRequest)
    svc = service(request)
    await svc.write(svc.app.annotate_many, tenant(request), path_id(request, "story_id"), req.node_ids, action)
    return respond(NodeIdsResponse(node_ids=req.node_ids))


async def hide_many(request: web.Request) -> web.Response:
    return await _annotate_many(request, "hide")


async def unhide_many(request: web.Request) -> web.Response:
    return await _annotate_many(request, "unhide")
