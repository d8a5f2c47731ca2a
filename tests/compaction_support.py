"""Running compaction synchronously in tests (the offline summarizer, no job system)."""

from __future__ import annotations

import asyncio
from uuid import UUID

from domain.application import Changji
from schedulers.outcomes import Failed
from schedulers.workers.compaction import CompactWorker, Inline

SMALL = {"keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0}


def compact(app: Changji, node_id: UUID, manual: bool = False) -> str:
    """Compact the path to a node now; settles the node's announced job, if any."""
    done = asyncio.run(CompactWorker(app, Inline(), None).compact(node_id, manual, node_id))
    assert not isinstance(done, Failed), done
    if app.node_aggregate(node_id).jobs.get("compact") == "pending":
        app.jobs.finish_job(node_id, "compact", done.detail)
    return done.detail


def compact_if_due(app: Changji, node_id: UUID) -> str | None:
    return compact(app, node_id) if app.node_aggregate(node_id).jobs.get("compact") == "pending" else None
