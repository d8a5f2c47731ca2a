"""A context as the chat-completions proxy sends it upstream: changji's context at the user's words, with a
proxied front end's own part of its request — its fixed prompt as the system messages it sent (the context
is assembled with them joined), its blocks from inside its chat right before the user's words, the words it had the
reply start with, and what followed its chat at the end, all as they came. Pure.

The same function makes what the upstream gets and what the context endpoint shows at the node, so the
two cannot drift apart."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import orjson

from projections.context.records import Context, ExplainBlock, Message

CLIENT_PART_TYPE = "application/vnd.changji.client-part+json"  # a part: its texts' blobs, by where they go
TEXT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class ClientPart:
    """A proxied front end's own part of what the upstream gets for a request."""

    fixed: tuple[str, ...]  # the system messages before its chat: card text, lore, examples
    blocks: tuple[str, ...] = ()  # system messages inside its chat: an author's note, its summaries
    after: tuple[str, ...] = ()  # system messages after its chat's last message: post-history instructions
    prefill: str = ""  # the assistant's words it ended with, for the reply to start with

    @property
    def prompt(self) -> str:
        return "\n\n".join(self.fixed)

    def texts(self) -> list[str]:
        return [*self.fixed, *self.blocks, *self.after, *([self.prefill] if self.prefill else [])]

    def manifest(self) -> bytes:
        """As kept: the names of its texts' blobs (each text kept once, however many parts share it — a
        front end's lore changes one system message of several), by where they go."""
        data = {
            "fixed": [text_name(t) for t in self.fixed],
            "blocks": [text_name(t) for t in self.blocks],
            "after": [text_name(t) for t in self.after],
            "prefill": text_name(self.prefill) if self.prefill else "",
        }
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)

    @classmethod
    def from_manifest(cls, data: bytes, text_of: Callable[[str], str | None]) -> ClientPart | None:
        """The part a manifest names, its texts read with `text_of` (None: one of them is not kept)."""
        kept = orjson.loads(data)
        names = [*kept["fixed"], *kept["blocks"], *kept["after"], *([kept["prefill"]] if kept["prefill"] else [])]
        texts = {name: text_of(name) for name in names}
        if any(text is None for text in texts.values()):
            return None

        def of(names: list[str]) -> tuple[str, ...]:
            return tuple(str(texts[name]) for name in names)

        prefill = str(texts[kept["prefill"]]) if kept["prefill"] else ""
        return cls(of(kept["fixed"]), of(kept["blocks"]), of(kept["after"]), prefill)


def text_name(text: str) -> str:
    """The name of a text's blob (its SHA-256, as the blob store names what it keeps)."""
    return hashlib.sha256(text.encode()).hexdigest()


def relayed(context: Context, part: ClientPart, count: Callable[[str], int]) -> Context:
    """`context` (assembled at a user node with the client's fixed prompt) with the rest of the client's
    part put where the front end had it, each in the explain list."""
    messages, explain = list(context.messages), list(context.explain)
    added = 0
    if len(part.fixed) > 1 and messages and messages[0] == Message("system", part.prompt):  # as many as it sent
        explain = [_shifted(b, 1, len(part.fixed) - 1) for b in explain if b.message_index != 0 or b.what != "system"]
        messages[0:1] = [Message("system", text) for text in part.fixed]
        for i, text in enumerate(part.fixed):
            tokens = count(text)
            added += tokens
            explain.insert(i, _whole("client prompt", "the front end's own system message before its chat, as it came", text, tokens, i))  # fmt: skip
        added -= count(part.prompt)
    if part.blocks and messages and messages[-1].role == "user":
        at = len(messages) - 1
        shift = len(part.blocks)
        explain = [_shifted(block, at, shift) for block in explain]
        messages[at:at] = [Message("system", text) for text in part.blocks]
        for i, text in enumerate(part.blocks):
            tokens = count(text)
            added += tokens
            why = "the front end's own block from inside its chat, sent as it came, before the user's words"
            explain.append(_whole("client block", why, text, tokens, at + i))
    if part.prefill:
        messages.append(Message("assistant", part.prefill))
        tokens = count(part.prefill)
        added += tokens
        explain.append(_whole("prefill", "the words the front end had the reply start with", part.prefill, tokens, len(messages) - 1))  # fmt: skip
    for text in part.after:
        messages.append(Message("system", text))
        tokens = count(text)
        added += tokens
        why = "the front end's own instruction after its chat, sent as it came, at the end"
        explain.append(_whole("client after", why, text, tokens, len(messages) - 1))
    return replace(context, messages=tuple(messages), explain=tuple(explain), tokens=context.tokens + added)


def _whole(what: str, why: str, text: str, tokens: int, index: int) -> ExplainBlock:
    return ExplainBlock(what, why, (), len(text), tokens, index, span=(0, len(text)), end_message=index)


def _shifted(block: ExplainBlock, at: int, shift: int) -> ExplainBlock:
    """An explain block of the messages from `at` on, moved down by `shift` (messages put before them)."""
    index = block.message_index
    end = block.end_message
    if (index is None or index < at) and (end is None or end < at):
        return block
    return replace(
        block,
        message_index=index + shift if index is not None and index >= at else index,
        end_message=end + shift if end is not None and end >= at else end,
    )
