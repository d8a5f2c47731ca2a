"""The drift on a story's path: the signals at a reply, and whether the next turn re-anchors."""

from __future__ import annotations

from aiohttp import web

from api.http import path_id, query_id, respond, service, tenant
from api.schemas.drift import DriftResponse, DriftSignalModel


async def get_drift(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    report = await svc.executor.load(svc.views.drift.report_at, tenant(request), story_id, query_id(request, "at"))
    drift, reply = report.drift, report.drift.reply
    signals = [
        DriftSignalModel(
            name=s.name,
            value=s.value,
            threshold=s.threshold,
            fired=s.fired,
            detail=s.detail,
            evidence=s.evidence,
            replies=list(s.replies),
        )
        for s in drift.signals
    ]
    return respond(
        DriftResponse(
            story_id=story_id,
            at=report.at.id,
            reply_id=reply.id if reply else None,
            turn=reply.turn if reply else None,
            signals=signals,
            fired=drift.fired,
            run=drift.run,
            forced=drift.forced,
            reanchor_turns=report.every,
            next_periodic_turn=report.next_periodic,
            anchor=report.anchor,
            anchor_derived=report.derived,
            language=report.language,
        )
    )
