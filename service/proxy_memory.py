"""A proxied chat's first request carries its card's memory: the story it will make does not exist until the
upstream has answered (a request that fails makes none), so there is no context to put the memory in; the
request goes as it came, with the card's resident summary and what its memory recalls for the user's words
put before those words in the last user message — the place a context's tail blocks take, which keeps the
roles as the front end sent them.

Only while the request leaves the room: what it sends, the resident summary and the recalled passages
together stay within the card's own budget (its window less the reply's reserve), the resident summary
first; from the second request on, the story's context carries them as any context does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from domain.card.card import Card
from domain.memory.resident import fit_resident
from domain.texts import CONTEXT_TEXTS
from projections.context.memory_recall import memory_block
from projections.context.system_prompt import fill_macros
from service.card_memory_reads import CardMemoryReads


def with_card_memory(
    reads: CardMemoryReads, card: Card, messages: list[dict[str, Any]], count: Callable[[str], int]
) -> list[dict[str, Any]]:
    """`messages` (a new story's first request, as it came) with the card's memory before the user's last
    words, where the card has a memory and the budget has room for it."""
    settings = card.settings
    resident, recall = reads.of(card, settings)
    at = _last_words(messages)
    if at is None or (resident is None and recall is None):
        return messages
    words = str(messages[at]["content"])
    char, user = card.data.name, settings.user_name
    texts = CONTEXT_TEXTS[card.data.language(settings.language)]
    room = settings.context_window - settings.reply_reserve - sum(count(_text(m)) for m in messages)
    blocks: list[str] = []
    if resident is not None:
        fitted = fit_resident(fill_macros(resident.text, char, user), 0, texts.language).text
        if fitted is not None:
            text = f"{texts.resident_opener.format(char=char, user=user)}\n\n{fitted}"
            if count(text) <= room:
                blocks.append(text)
                room -= count(text)
    if recall is not None and settings.recall_tokens > 0:
        share = min(settings.recall_tokens, room)
        found = memory_block(
            recall(words), resident.text if resident else "", share, count, texts,
            lambda text: fill_macros(text, char, user),
        )  # fmt: skip
        if found is not None:
            blocks.append(found.text)
    if not blocks:
        return messages
    out = [dict(m) for m in messages]
    out[at]["content"] = "\n\n".join([*blocks, words])
    return out


def _last_words(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the last user message, when its content is text (None: none, or parts)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i if isinstance(messages[i].get("content"), str) else None
    return None


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else str(content or "")
