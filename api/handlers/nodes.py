"""Nodes: append (user words, a reply, a regenerate), read, children and siblings, annotations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from uuid import UUID

from aiohttp import web

from api.http import body, if_match, keyed, new_id, path_id, respond, service, tenant
from api.schemas.nodes import (
    AppendNodeRequest,
    AppendNodeResponse,
    NodeIdsRequest,
    NodeIdsResponse,
    NodeListResponse,
    NodeResponse,
    ReviseRequest,
)
from domain.aggregates import Written
from domain.values import NodeView

Annotate = Callable[[str, UUID], Written[NodeView]]
AnnotateMany = Callable[[str, UUID, Sequence[UUID]], int]


async def append_node(request: web.Request) -> web.Response:
    req = await body(request, AppendNodeRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    node_id = new_id(request, "node")
    made = (
        await svc.executor.short_load(svc.writes.appended, tenant(request), story_id, node_id)
        if keyed(request)
        else None
    )
    write = svc.executor.short_write if svc.views.warm(story_id) else svc.executor.write  # (see `context`)
    appended = made or await write(
        svc.writes.append_node, tenant(request), story_id, node_id, req.kind, req.text, req.parent_id, if_match(request)
    )  # (made: a retry of a request whose answer was lost)
    node = appended.node
    if node.kind == "user" and made is None:  # the words' search of the memory, before the context is asked for
        views, tenant_id = svc.views, tenant(request)
        node = await svc.searches.rewrite(
            tenant_id, node, lambda: views.recalls(lambda: views.context(tenant_id, story_id, node.id))
        )
    reply_to = node.parent_id if node.kind == "reply" else None
    siblings = await svc.executor.short_query(svc.store.children, reply_to) if reply_to else []
    answer = AppendNodeResponse(
        node=NodeResponse.of(node), story_version=appended.story_version, regenerated=len(siblings) > 1
    )
    return respond(answer, 201, appended.story_version)


async def get_node(request: web.Request) -> web.Response:
    svc = service(request)
    _, node = await svc.executor.load(svc.app.owned_node, tenant(request), path_id(request, "node_id"))
    return respond(NodeResponse.of(node.view), version=node.version)


async def _nodes(request: web.Request, of_parent: bool) -> web.Response:
    svc = service(request)
    _, node = await svc.executor.load(svc.app.owned_node, tenant(request), path_id(request, "node_id"))
    parent = node.id if of_parent else node.parent_id
    rows = await svc.executor.query(svc.store.children, parent) if parent else [{"id": str(node.id)}]
    views = [await svc.executor.load(svc.app.node, UUID(r["id"])) for r in rows]
    return respond(NodeListResponse(nodes=[NodeResponse.of(v) for v in views]))


async def children(request: web.Request) -> web.Response:
    return await _nodes(request, of_parent=True)


async def siblings(request: web.Request) -> web.Response:
    """The node and its siblings (swipes), oldest first."""
    return await _nodes(request, of_parent=False)


async def _annotate(request: web.Request, command: Annotate) -> web.Response:
    svc = service(request)
    written = await svc.executor.write(command, tenant(request), path_id(request, "node_id"))
    return respond(NodeResponse.of(written.value), version=written.value.version)


async def star(request: web.Request) -> web.Response:
    return await _annotate(request, service(request).app.nodes.star_node)


async def unstar(request: web.Request) -> web.Response:
    return await _annotate(request, service(request).app.nodes.unstar_node)


async def hide(request: web.Request) -> web.Response:
    return await _annotate(request, service(request).app.nodes.hide_node)


async def unhide(request: web.Request) -> web.Response:
    return await _annotate(request, service(request).app.nodes.unhide_node)


async def revise(request: web.Request) -> web.Response:
    req = await body(request, ReviseRequest)
    svc = service(request)
    node_id = path_id(request, "node_id")
    written = await svc.executor.write(svc.app.nodes.revise_reply, tenant(request), node_id, req.text, req.reason)
    return respond(NodeResponse.of(written.value), version=written.value.version)


async def _annotate_many(request: web.Request, command: AnnotateMany) -> web.Response:
    req = await body(request, NodeIdsRequest)
    await service(request).executor.write(command, tenant(request), path_id(request, "story_id"), req.node_ids)
    return respond(NodeIdsResponse(node_ids=req.node_ids))


async def hide_many(request: web.Request) -> web.Response:
    return await _annotate_many(request, service(request).app.nodes.hide_nodes)


async def unhide_many(request: web.Request) -> web.Response:
    return await _annotate_many(request, service(request).app.nodes.unhide_nodes)
