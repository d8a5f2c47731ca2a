"""Compaction seen from outside: the summary layers of a path, a manual compact, edits of a summary."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from aiohttp import web

from api.bootstrap import Service
from api.http import body, path_id, query_id, respond, service, tenant
from api.schemas.context import (
    CompactRequest,
    CompactResponse,
    DigestModel,
    EditSummaryRequest,
    EpisodeModel,
    SummariesResponse,
)
from domain.errors import NothingToCompactError
from domain.values import Episode, NodeView
from schedulers.outcomes import Failed


async def summary_fields(svc: Service, tenant_id: str, story_id: UUID, at: UUID | None) -> dict[str, Any]:
    at_node = await svc.executor.load(svc.views.summaries, tenant_id, story_id, at)
    node, plan = at_node.node, at_node.plan
    digest = None
    if plan.layers.digest is not None:
        holder, d = plan.layers.digest
        digest = DigestModel(
            node_id=holder.id, digest_id=d.digest_id, last_turn=d.last_turn, covers=[0, holder.depth],
            sections=dict(d.sections), absorbed=list(d.absorbed), anchors=list(d.anchors), author=d.author,
            edited=d.edited,
        )  # fmt: skip
    episodes = [_episode(end, e) for end, e in plan.layers.episodes]
    return {
        "story_id": story_id, "at": node.id, "digest": digest, "episodes": episodes,
        "uncovered_turns": plan.uncovered_turns,
    }  # fmt: skip


def _episode(end: NodeView, e: Episode) -> EpisodeModel:
    return EpisodeModel(
        node_id=end.id, episode_id=e.episode_id, first_turn=e.first_turn, last_turn=e.last_turn,
        covers=[e.start_depth, end.depth], text=e.text, anchors=list(e.anchors), author=e.author, edited=e.edited,
    )  # fmt: skip


async def get_summaries(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    return respond(SummariesResponse(**await summary_fields(svc, tenant(request), story_id, query_id(request, "at"))))


async def compact(request: web.Request) -> web.Response:
    """Pack everything but the last keep_turns now (from 500 characters), then fold as usual."""
    req = await body(request, CompactRequest, optional=True)
    svc, story_id = service(request), path_id(request, "story_id")
    node = (await svc.executor.load(svc.views.summaries, tenant(request), story_id, req.at)).node
    done = await svc.compactor.compact(node.id, manual=True, job_node=node.id)
    if isinstance(done, Failed):
        raise NothingToCompactError(f"the compaction failed: {done.error}")
    if done.nothing_due:
        raise NothingToCompactError(
            "nothing to compact: the turns before the last keep_turns hold fewer than 500 characters",
            field="at" if req.at else None,
        )
    await svc.read_side.sync()
    fields = await summary_fields(svc, tenant(request), story_id, node.id)
    return respond(CompactResponse(**fields, done=done.detail))


async def edit_summary(request: web.Request) -> web.Response:
    req = await body(request, EditSummaryRequest)
    svc, node_id = service(request), path_id(request, "node_id")
    view = (
        await svc.executor.write(svc.app.compaction.edit_summary, tenant(request), node_id, req.text, req.sections)
    ).value
    return respond(SummariesResponse(**await summary_fields(svc, tenant(request), view.story_id, view.id)))
