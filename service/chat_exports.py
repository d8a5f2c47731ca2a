"""A story's path as a SillyTavern chat file (`service/chat_transfer.py` writes the messages)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from uuid import UUID

from domain.application import Changji
from domain.tree.rules.paths import project_path
from projections.context.system_prompt import fill_macros
from projections.read_models.store import ReadModels
from service.chat_transfer import chat_file, chat_messages


@dataclass(frozen=True, slots=True)
class ExportedChat:
    title: str
    data: bytes


def chat_export(
    app: Changji, store: ReadModels, tenant_id: str, story_id: UUID, at: UUID | None, swipes: bool
) -> ExportedChat:
    """The path to a node (default: the leaf) as a SillyTavern chat; `swipes`: each reply's siblings as its
    swipes."""
    story = app.story(tenant_id, story_id)
    card, settings = app.card_of(story).data, app.settings(story)
    path = project_path(app.node, app.leaf_or(story, at, "at").id, None)
    siblings = {
        node.id: [app.node(UUID(row["id"])) for row in store.children(node.id) if row["kind"] == "reply"]
        for node in path
        if swipes and node.kind == "user"
    }
    source = story.imported or {}
    names = (settings.user_name, card.name)
    greetings = source.get("greetings") or [card.greeting(i) for i in range(card.greeting_count)]
    fill = [fill_macros(text, card.name, settings.user_name) for text in greetings]
    root = replace(path[0], text=fill_macros(path[0].text, card.name, settings.user_name))
    messages = chat_messages([root, *path[1:]], siblings, fill, names, source.get("generated"))
    return ExportedChat(story.title, chat_file(messages, names, story.created_on, source.get("header") or {}))
