"""Annotations of nodes: star (anchor) and unstar, hide and unhide (one node or several), revise a reply."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from uuid import UUID

from domain.aggregates import CommandGroup, Written
from domain.tree.commands.base import TreeAggregates
from domain.tree.commands.jobs import SideCall, record_calls
from domain.tree.node import Node
from domain.values import NodeView


class NodeCommands(CommandGroup[TreeAggregates]):
    def star_node(self, tenant_id: str, node_id: UUID) -> Written[NodeView]:
        return self._annotate(tenant_id, node_id, Node.star)

    def unstar_node(self, tenant_id: str, node_id: UUID) -> Written[NodeView]:
        return self._annotate(tenant_id, node_id, Node.unstar)

    def hide_node(self, tenant_id: str, node_id: UUID) -> Written[NodeView]:
        return self._annotate(tenant_id, node_id, Node.hide)

    def unhide_node(self, tenant_id: str, node_id: UUID) -> Written[NodeView]:
        return self._annotate(tenant_id, node_id, Node.unhide)

    def revise_reply(self, tenant_id: str, node_id: UUID, text: str, reason: str) -> Written[NodeView]:
        """A new text for a sealed reply (or the greeting), kept as a revision of the node."""
        return self._annotate(tenant_id, node_id, lambda node: node.revise(text, reason))

    def continue_reply(
        self, tenant_id: str, node_id: UUID, text: str, call: tuple[str, int, int, float], client_part: str
    ) -> Written[NodeView]:
        """A reply a model went on with (a proxied front end's continue): its new text, as a revision, the
        call — (model, prompt tokens, completion tokens, milliseconds) — in its cost ledger, and the blob of
        the front end's own part of the request."""
        model, prompt_tokens, completion_tokens, latency_ms = call

        def go_on(node: Node) -> None:
            node.record_call("turn", model, prompt_tokens, completion_tokens, latency_ms, "ok")
            node.note_client_part(client_part)
            node.revise(text, "continued")

        return self._annotate(tenant_id, node_id, go_on)

    def note_search_terms(self, tenant_id: str, node_id: UUID, terms: str, call: SideCall) -> Written[NodeView]:
        """The side model's search of the memory for the user's words at a node ("": it gave none that could
        be used, or none in time), with its call in the node's cost ledger."""

        def note(node: Node) -> None:
            node.note_search_terms(terms)  # (refused first on a node that is not the user's words)
            record_calls(node, [call])

        return self._annotate(tenant_id, node_id, note)

    def hide_nodes(self, tenant_id: str, story_id: UUID, node_ids: Sequence[UUID]) -> int:
        return self._annotate_many(tenant_id, story_id, node_ids, Node.hide)

    def unhide_nodes(self, tenant_id: str, story_id: UUID, node_ids: Sequence[UUID]) -> int:
        return self._annotate_many(tenant_id, story_id, node_ids, Node.unhide)

    def _annotate(self, tenant_id: str, node_id: UUID, change: Callable[[Node], None]) -> Written[NodeView]:
        _, node = self.app.owned_node(tenant_id, node_id)
        with self.app.evicting(node):
            change(node)
            return Written(node.view, self.app.commit(node))

    def _annotate_many(
        self, tenant_id: str, story_id: UUID, node_ids: Sequence[UUID], change: Callable[[Node], None]
    ) -> int:
        """The same annotation on several nodes of one story, in one transaction."""
        story = self.app.story(tenant_id, story_id)
        nodes = [self.app.story_node(story, node_id, "node_ids") for node_id in node_ids]
        with self.app.evicting(*nodes):
            for node in nodes:
                change(node)
            return self.app.commit(*nodes)
