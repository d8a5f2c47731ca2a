"""Outcomes of background work, recorded on the node the work was for (never on "the current leaf").

Recording is idempotent: a job whose node already holds its final outcome records nothing more than
the model call it made, so running a job twice is harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from domain.aggregates import CommandGroup
from domain.tree.commands.base import TreeAggregates
from domain.tree.node import Node
from domain.values import CallPurpose, JobKind


@dataclass(frozen=True, slots=True)
class SideCall:
    """One side-model call, for the cost ledger."""

    purpose: CallPurpose
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    outcome: str


@dataclass(frozen=True, slots=True)
class Settled:
    """What recording a job outcome did: `recorded` is False when the node already had its outcome."""

    recorded: bool
    position: int
    attempt: int = 0


def record_calls(node: Node, calls: Sequence[SideCall]) -> None:
    for call in calls:
        node.record_call(
            call.purpose, call.model, call.prompt_tokens, call.completion_tokens, call.latency_ms, call.outcome
        )


class JobCommands(CommandGroup[TreeAggregates]):
    def settle(
        self, node_id: UUID, kind: JobKind, call: SideCall | None, decide: Callable[[Node], int | None]
    ) -> Settled:
        """Record the call (if any), then — unless the node already has its final outcome of `kind` —
        what `decide` records on it (it returns the attempt number, for failures)."""
        node = self.app.node_aggregate(node_id)
        settled = node.job_settled(kind)
        with self.app.evicting(node):
            record_calls(node, [call] if call is not None else [])
            attempt = 0 if settled else decide(node)
            if not node.pending_events:
                return Settled(False, 0)
            return Settled(not settled, self.app.commit(node), attempt or 0)

    def record_job_failure(
        self, node_id: UUID, kind: JobKind, error: str, retry_at: datetime | None, call: SideCall | None
    ) -> Settled:
        return self.settle(node_id, kind, call, lambda node: node.fail_job(kind, error, retry_at))

    def record_job_skip(self, node_id: UUID, kind: JobKind, reason: str, call: SideCall | None = None) -> Settled:
        return self.settle(node_id, kind, call, lambda node: node.skip_job(kind, reason))

    def record_job_skips(self, node_ids: list[UUID], kind: JobKind, reason: str) -> Settled:
        """The same skip for many nodes in one transaction (work that is not done at all, e.g. with no
        side model configured); nodes that already have their outcome are left alone."""
        nodes = [node for node in map(self.app.node_aggregate, node_ids) if not node.job_settled(kind)]
        with self.app.evicting(*nodes):
            for node in nodes:
                node.skip_job(kind, reason)
            return Settled(bool(nodes), self.app.commit(*nodes) if nodes else 0)

    def retry_job(self, tenant_id: str, node_id: UUID, kind: JobKind) -> int:
        """The user's word that the node's failed or skipped work of `kind` be done again (its position)."""
        _, node = self.app.owned_node(tenant_id, node_id)
        with self.app.evicting(node):
            node.retry_job(kind)
            return self.app.commit(node)

    def finish_job(self, node_id: UUID, kind: JobKind, detail: str) -> Settled:
        node = self.app.node_aggregate(node_id)
        if node.job_settled(kind):
            return Settled(False, 0)
        with self.app.evicting(node):
            node.finish_job(kind, detail)
            return Settled(True, self.app.commit(node))
