"""The base of the command mixins of `Changji`: the loading and saving helpers the application
provides, declared once for the type checker."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from eventsourcing.domain import Aggregate

    from domain.card import Card
    from domain.errors import NotFoundError
    from domain.node import Node
    from domain.story import Story
    from domain.values import NodeView, StorySettings

    A = TypeVar("A", bound=Aggregate)


class AppCommands:
    """Mixed into `Changji` through the command mixins; `Changji` implements what is declared here."""

    if TYPE_CHECKING:

        def story(self, tenant_id: str, story_id: UUID) -> Story: ...
        def story_node(self, story: Story, node_id: UUID, field: str = "node_id") -> Node: ...
        def owned_node(self, tenant_id: str, node_id: UUID) -> tuple[Story, Node]: ...
        def node(self, node_id: UUID) -> NodeView: ...
        def settings(self, story: Story) -> StorySettings: ...
        def card_of(self, story: Story) -> Card: ...
        def job_node(self, node_id: UUID) -> Node: ...
        def _get(self, cls: type[A], aggregate_id: UUID, missing: type[NotFoundError]) -> A: ...
        def _save(self, *aggregates: Aggregate) -> int: ...
        def _command(self, *aggregates: Aggregate | None) -> AbstractContextManager[None]: ...
        @staticmethod
        def _expect(aggregate: Aggregate, expected_version: int | None) -> None: ...
