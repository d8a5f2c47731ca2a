"""SillyTavern chats into stories and back (`interchange/chats.py` reads the files, `interchange/chat_export.py`
writes them).

Into a story, on top of what the reader decides (runs of one role joined, swipes kept, dates parsed):
- the chosen greeting is the story's root, word for word; its index is the card greeting it equals
  (else 0); the greeting's other swipes are kept with the import's record and exported back;
- the tree allows a user node under the greeting or a reply, a reply under a user node only: steps of
  one role that still meet (a hidden run beside a visible one) are joined — the hidden ones left out of a
  node that is shown, and kept in the import's record (`unplaced`) — and
  a reply right after the greeting is joined to the greeting's text (there is no user turn to hang it on)
  — a hidden one is not (it would be shown): it is kept in the import's record (`unplaced`);
- the chat's user name becomes the story's `user_name` (it fills {{user}}, and names the user on export);
- a chat without a greeting gets an empty one (the root is a greeting), which contexts leave out.
Back out of a story: its path, each reply with its siblings as swipes (`scope=tree`) or alone
(`scope=path`); hidden nodes as SillyTavern's hidden (`is_system`) messages; dates as the nodes'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from domain.tree.commands.chat_imports import ImportedChat, ImportedStep, ImportedText
from domain.values import CardData, NodeView
from interchange.chat_export import ChatExportMessage, write_chat
from interchange.chat_plan import ChatFormatError, ChatImportPlan, ChatStep, ChatTurnText

JOIN = "\n\n"
MAX_TEXT = 100_000  # a node's text, as the API takes it


NOTED = 100  # warnings and skipped lines kept in the import's record (and the answer); the rest counted


def imported_chat(plan: ChatImportPlan, card: CardData, title: str, max_text: int = MAX_TEXT) -> ImportedChat:
    greetings = [g.text for g in plan.greetings]
    greeting = greetings[plan.greeting_index] if greetings else ""
    runs: list[list[ImportedStep]] = []
    unplaced: list[str] = []
    for step in map(_step, plan.steps):
        if runs and runs[-1][-1].kind == step.kind:
            runs[-1].append(step)
        elif not runs and step.kind == "reply" and step.hidden:  # no turn to hang it on, and not to be shown
            unplaced.append(step.swipes[step.chosen].text)
        elif not runs and step.kind == "reply":
            greeting = JOIN.join(t for t in (greeting, step.swipes[step.chosen].text) if t)
        else:
            runs.append([step])
    if len(greeting) > max_text:
        raise ChatFormatError(f"the greeting with the replies joined to it is over {max_text} characters", "greeting")
    steps = [_joined(run, max_text, unplaced) for run in runs]
    wanted = greeting.strip()
    index = next((i for i in range(card.greeting_count) if card.greeting(i).strip() == wanted), 0)
    source = {
        "format": "sillytavern",
        "header": plan.header,
        "greetings": greetings,
        "greeting_index": plan.greeting_index,
        "user_name": plan.user_name,
        "character_name": plan.character_name,
        "warnings": list(plan.warnings[:NOTED]),
        "warning_count": len(plan.warnings),
        "skipped_lines": list(plan.skipped_lines[:NOTED]),
        "skipped_count": len(plan.skipped_lines),
        "unplaced": unplaced,
    }
    return ImportedChat(title or f"{card.name} (imported)", greeting, index, steps, source)


def _step(step: ChatStep) -> ImportedStep:
    at = step.chosen_index
    swipes = [*step.alternatives[:at], step.chosen, *step.alternatives[at:]]
    return ImportedStep(step.role, tuple(map(_text, swipes)), at, step.hidden)


def _text(turn: ChatTurnText) -> ImportedText:
    return ImportedText(turn.text, turn.sent_at, turn.generated)


def _joined(run: list[ImportedStep], max_text: int, unplaced: list[str]) -> ImportedStep:
    """Steps of one role that still meet, as one: the chosen texts joined, the last one's swipes its swipes.
    Hidden steps beside visible ones are left out of it (it is shown) and kept in `unplaced`."""
    if not all(step.hidden for step in run):
        unplaced += [step.swipes[step.chosen].text for step in run if step.hidden]
        run = [step for step in run if not step.hidden]
    last = run[-1]
    if len(run) > 1:
        head = JOIN.join(step.swipes[step.chosen].text for step in run[:-1])
        last = ImportedStep(
            last.kind,
            tuple(replace(s, text=JOIN.join((head, s.text))) for s in last.swipes),
            last.chosen,
            all(step.hidden for step in run),
        )
    if any(len(s.text) > max_text for s in last.swipes):
        raise ChatFormatError(f"a message joined with its neighbours is over {max_text} characters", "messages")
    return last


def chat_messages(
    path: Sequence[NodeView],
    siblings: Mapping[UUID, Sequence[NodeView]],
    greetings: Sequence[str],
    names: tuple[str, str],
    generated: Mapping[str, Sequence[str | None]] | None = None,
) -> list[ChatExportMessage]:
    """The path as SillyTavern messages; `siblings`: the replies under each user node (empty: no swipes; a
    hidden one is left out, SillyTavern having no hidden swipe); `greetings`: the greeting's swipes, the path's
    root among them; `generated`: the generation times an import kept, by node id."""
    times = generated or {}

    def gen(node: NodeView) -> tuple[str | None, str | None]:
        started, finished = times.get(str(node.id)) or (None, None)
        return started, finished

    user, char = names
    out = []
    for node in path:
        if node.kind == "greeting":
            swipes, at = _greeting_swipes(node.text, greetings)
            if node.text.strip() or len(swipes) > 1:
                out.append(ChatExportMessage("greeting", node.text, node.created_at, char, False, swipes, at))
            continue
        name = user if node.kind == "user" else char
        under = siblings.get(node.parent_id, ()) if node.parent_id is not None and node.kind == "reply" else ()
        others = [n for n in under if n.text.strip() and (not n.hidden or n.id == node.id)]
        ids = [n.id for n in others]
        swipes, at = (tuple(n.text for n in others), ids.index(node.id)) if node.id in ids else ((), 0)
        kind: Literal["user", "reply"] = node.kind
        each = tuple(gen(n) for n in others) if swipes else ()
        out.append(
            ChatExportMessage(kind, node.text, node.created_at, name, node.hidden, swipes, at, {}, gen(node), each)
        )
    return out


def _greeting_swipes(text: str, greetings: Sequence[str]) -> tuple[tuple[str, ...], int]:
    swipes = list(greetings)
    if text in swipes:
        return tuple(swipes), swipes.index(text)
    return ((text, *swipes), 0) if swipes else ((), 0)


def chat_file(
    messages: Sequence[ChatExportMessage], names: tuple[str, str], created: datetime, header: Mapping[str, Any]
) -> bytes:
    user, char = names
    metadata = header.get("chat_metadata") if isinstance(header.get("chat_metadata"), dict) else None
    date = header.get("create_date") if isinstance(header.get("create_date"), str) else None
    return write_chat(
        messages, user_name=user, character_name=char, created_at=created, chat_metadata=metadata, create_date=date
    )
