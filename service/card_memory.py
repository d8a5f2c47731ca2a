"""A card's memory brought up to date with its stories: a deleted story is forgotten and a restored one
remembered (one the user asked to forget stays forgotten), each live story whose current path changed
since its recap is recapped, and the recaps are merged when a merge is due.

With a side model, recaps and merges are its work (`card_memory_prompts.py`, in the card's language); an
answer that fails its checks — a recap missing a section, a merge that does not parse, drops a story it
was given, names one it does not know or loses an item the user wrote — is refused with nothing kept and
asked again, and after `attempts` refusals the offline rules write it (`domain/memory/recaps.py`,
`offline_merge.py`), so the whole pipeline also runs with no model at all.

Nothing here is held only in memory: what is due is read from the events (a recap is written once per
fingerprint of the path it read; a merge is due while a recap changed since the last one), so work a
crash interrupted is found again, and done once. The model calls happen outside the domain's lock; each
write is checked against what was read (a merge against the memory's version)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import ParamSpec, Protocol, TypeVar
from uuid import UUID

from domain.application import Changji
from domain.errors import DomainError, StoryNotFoundError, VersionConflictError
from domain.language import Language
from domain.memory.card_memory import CardMemory, MemoryStateError, Usage
from domain.memory.events import ForgetReason, MemoryAuthor
from domain.memory.handbook import Handbook, Tags, forget, render_handbook
from domain.memory.offline_merge import offline_merge
from domain.memory.recaps import offline_recap, recap_title
from domain.ports import ChatModel, ModelCallError
from domain.tree.recap_source import RECENT_CHARS, PathForRecap, path_for_recap
from domain.tree.story import Story
from projections.read_models.store import ReadModels
from service.card_memory_prompts import (
    MERGE_TOKENS,
    RECAP_INPUT_CHARS,
    RECAP_TOKENS,
    checked_recap,
    merge_messages,
    parsed_merge,
    recap_messages,
)
from service.executor import W

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
STORIES_PER_CARD = 10_000  # a card's live stories listed per sync
ATTEMPTS = 2  # side-model answers refused before the offline rules write instead
CONFLICTS = 4  # merges made again because the memory changed meanwhile, at most, per sync


class Runs(Protocol):
    """Where the domain calls run: the service's `Executor`, or `Inline` (`schedulers/workers/compaction.py`)."""

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W: ...
    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...


@dataclass(frozen=True, slots=True)
class Synced:
    recapped: int
    forgotten: int
    remembered: int
    merged: bool
    position: int  # the notification position of the last event saved (0: none)


@dataclass(frozen=True, slots=True)
class _ToRecap:
    source: PathForRecap
    title: str
    previous: str | None
    language: Language
    char: str
    user: str


@dataclass(frozen=True, slots=True)
class _Plan:
    forget: tuple[tuple[UUID, ForgetReason], ...]
    remember: tuple[UUID, ...]
    recap: tuple[_ToRecap, ...]


@dataclass(frozen=True, slots=True)
class _ToMerge:
    version: int
    handbook: Handbook  # the last one, the forgotten stories taken out by the program's rule
    tags: Tags
    changed: dict[UUID, tuple[str, str]]  # (title, text) of the recaps the last merge did not read
    forgotten: tuple[UUID, ...]
    keep: tuple[str, ...]  # the user's items, as the handbook renders them
    recaps: dict[UUID, str]  # every remembered recap (for the offline merge)
    order: tuple[UUID, ...]
    memory: CardMemory
    language: Language
    char: str
    user: str


class CardMemoryKeeper:
    def __init__(
        self, app: Changji, store: ReadModels, runs: Runs, model: ChatModel | None = None, attempts: int = ATTEMPTS
    ) -> None:
        self.app, self.store, self.runs, self.model, self.attempts = app, store, runs, model, attempts
        self._locks: dict[UUID, asyncio.Lock] = {}

    async def sync(self, tenant_id: str, card_id: UUID, only: Collection[UUID] | None = None) -> Synced:
        """Bring the card's memory up to date: forget, remember, recap (`only`: these stories alone; None:
        every one that changed), then merge if due. One sync per card at a time in this process."""
        async with self._locks.setdefault(card_id, asyncio.Lock()):
            plan = await self.runs.load(self._plan, tenant_id, card_id, only, self.model is not None)
            position = 0
            for story_id, reason in plan.forget:
                position = max(position, await self.runs.write(self.app.memory.forget_story, card_id, story_id, reason))
            for story_id in plan.remember:
                position = max(position, await self.runs.write(self.app.memory.remember_story, card_id, story_id))
            recapped = 0
            for item in plan.recap:
                text, author, usage = await self._recap(item)
                source = item.source
                span = (source.first_node_id, source.last_node_id)
                try:
                    written = await self.runs.write(
                        self.app.memory.record_recap, tenant_id, card_id, source.story_id, text, source.fingerprint,
                        span, source.turns, source.omitted_chars, author, usage,
                    )  # fmt: skip
                except MemoryStateError:  # (forgotten while its recap was being written: it is not kept)
                    log.info("story %s was forgotten while its recap was written", source.story_id)
                    continue
                recapped += written.value
                position = max(position, written.position)
            merged, at = await self._merge(card_id)
            return Synced(recapped, len(plan.forget), len(plan.remember), merged, max(position, at))

    # --- what is due (a domain read) ------------------------------------------------------------

    def _plan(self, tenant_id: str, card_id: UUID, only: Collection[UUID] | None, by_model: bool) -> _Plan:
        app = self.app
        card = app.card(tenant_id, card_id)
        rows = self.store.list_rows("stories", tenant_id, 0, STORIES_PER_CARD, 0, card_id=str(card.id))
        memory = app.memory.of(card.id)
        recaps = memory.recaps if memory is not None else {}
        forgotten = memory.forgotten if memory is not None else set()
        live = {UUID(row["id"]) for row in rows}
        to_forget: list[tuple[UUID, ForgetReason]] = []  # remembered stories deleted since
        for story_id in sorted(set(recaps) - forgotten - live, key=str):
            try:
                if app.get(Story, story_id, StoryNotFoundError).deleted:
                    to_forget.append((story_id, "deleted"))
            except StoryNotFoundError:
                continue
        remember, recap = [], []
        for row in rows:
            story_id = UUID(row["id"])
            if story_id in forgotten:
                if memory is not None and story_id in memory.asked:
                    continue
                remember.append(story_id)
            if only is not None and story_id not in only and story_id not in remember:
                continue
            story = app.story(tenant_id, story_id)
            settings = app.settings(story)
            if not settings.card_memory:
                continue
            previous = recaps.get(story_id)
            room = RECAP_INPUT_CHARS - len(previous.text if previous else "") if by_model else RECENT_CHARS
            source = path_for_recap(story, app.node, card.data.name, settings.user_name, max(room, RECENT_CHARS))
            if source is not None and by_model:  # the summaries read first, then the newest turns that fit
                source = _within(source, room)
            if source is None or not (source.digest or source.episodes or source.recent):
                continue
            if memory is not None and memory.recapped(story_id, source.fingerprint):
                continue
            title = story.title or f"{card.data.name} · {story.created_on:%Y-%m-%d}"
            previous_text = previous.text if previous is not None and story_id not in forgotten else None
            recap.append(
                _ToRecap(source, title, previous_text, app.language(story), card.data.name, settings.user_name)
            )
        return _Plan(tuple(to_forget), tuple(remember), tuple(recap))

    def _to_merge(self, card_id: UUID) -> _ToMerge | None:
        memory = self.app.memory.of(card_id)
        if memory is None or not memory.merge_due:
            return None
        card = self.app.card(memory.tenant_id, card_id)
        language = card.data.language(card.settings.language)
        handbook = memory.handbook
        for story_id in sorted(memory.to_forget, key=str):
            handbook, _ = forget(handbook, story_id)
        tags = Tags(set(memory.recaps) | memory.handbook.stories)
        keep = render_handbook(Handbook((), memory.users_items), tags, language)
        recaps = memory.remembered
        changed = {s: (recap_title(r.text), r.text) for s, r in memory.changed.items()}
        order = tuple(sorted(recaps, key=lambda s: (recaps[s].written_at, str(s))))
        return _ToMerge(
            memory.version, handbook, tags, changed, tuple(sorted(memory.to_forget, key=str)),
            tuple(line for line in keep.splitlines() if line.startswith("- ")), {s: r.text for s, r in recaps.items()},
            order, memory, language, card.data.name, card.settings.user_name,
        )  # fmt: skip

    # --- the side model, and the offline rules when it fails --------------------------------------

    async def _recap(self, item: _ToRecap) -> tuple[str, MemoryAuthor, Usage]:
        source = item.source
        usage = Usage()
        if self.model is not None:
            messages = recap_messages(
                item.language, item.char, item.user, item.previous, source.digest, source.episodes, source.recent,
                source.omitted_chars,
            )  # fmt: skip
            for attempt in range(1, self.attempts + 1):
                answer, usage = await self._call(messages, RECAP_TOKENS, usage)
                text = checked_recap(answer, item.language)
                if text is not None:
                    return text, "model", usage
                log.info("recap of story %s: answer %d refused", source.story_id, attempt)
        text = offline_recap(item.title, source.digest, source.episodes, item.language, _offline_recent(source.recent))
        return text, "offline", usage

    async def _merge(self, card_id: UUID) -> tuple[bool, int]:
        """Merge while one is due: the side model's answer (refused ones asked again, `attempts` times),
        then the offline rules'. A merge made while a recap or an edit came in is refused by the memory's
        version and made again on what is there now (that is no refusal of the answer)."""
        usage, refused = Usage(), 0
        for _ in range(self.attempts + 1 + CONFLICTS):
            plan = await self.runs.load(self._to_merge, card_id)
            if plan is None:
                return False, 0
            by_model = self.model is not None and refused < self.attempts
            try:
                if by_model:
                    messages = merge_messages(
                        plan.language, plan.char, plan.user, plan.handbook, plan.tags, plan.changed, plan.keep,
                        plan.forgotten,
                    )  # fmt: skip
                    answer, usage = await self._call(messages, MERGE_TOKENS, usage)
                    handbook, resident = parsed_merge(answer, plan.tags, plan.language)
                else:
                    recaps, order, keep = plan.recaps, plan.order, plan.memory.users_items
                    handbook, resident = offline_merge(recaps, order, plan.language, keep=keep)
                author: MemoryAuthor = "model" if by_model else "offline"
                done = await self.runs.write(
                    self.app.memory.record_merge, card_id, handbook, resident, author, usage, plan.version
                )
            except VersionConflictError:
                log.info("merge of card %s: the memory changed meanwhile; merging again", card_id)
                continue
            except DomainError as refusal:  # nothing of it is kept: ask again, then the offline rules
                refused += 1
                log.info("merge of card %s: answer %d refused (%s)", card_id, refused, refusal)
                continue
            return done.value, done.position
        return False, 0

    async def _call(self, messages: list[dict[str, str]], max_tokens: int, usage: Usage) -> tuple[str | None, Usage]:
        """The side model's answer (None: it failed), and the usage so far with this call's added."""
        assert self.model is not None
        try:
            result = await self.model.chat(messages, max_tokens=max_tokens)
        except ModelCallError as failure:
            log.info("a card-memory call to the side model failed: %s", failure.outcome)
            return None, usage
        added = Usage(
            result.model or self.model.model,
            usage.prompt_tokens + (result.prompt_tokens or 0),
            usage.completion_tokens + (result.completion_tokens or 0),
        )
        if result.finish_reason == "length":  # (cut off at max_tokens: a part is not an answer)
            log.info("a card-memory answer of the side model was cut off at its %d tokens", max_tokens)
            return None, added
        return (result.text if result.text.strip() else None), added


def _within(source: PathForRecap, room: int) -> PathForRecap:
    """The source with its oldest turns left out where its summaries and turns pass `room` characters."""
    left = max(room - sum(map(len, (source.digest or {}).values())) - sum(map(len, source.episodes)), RECENT_CHARS)
    lines, size = list(source.recent), sum(map(len, source.recent))
    omitted = source.omitted_chars
    while lines and size > left:
        size -= len(lines[0])
        omitted += len(lines.pop(0))
    return replace(source, recent=tuple(lines), omitted_chars=omitted)


def _offline_lines(recent: tuple[str, ...]) -> int:
    """The offline recap takes the newest turns up to RECENT_CHARS (the model's input may hold more)."""
    size = count = 0
    for line in reversed(recent):
        size += len(line)
        if size > RECENT_CHARS and count:
            break
        count += 1
    return count


def _offline_recent(recent: tuple[str, ...]) -> tuple[str, ...]:
    """The newest lines up to RECENT_CHARS, the oldest of them cut to its end where it alone passes it."""
    lines = recent[-_offline_lines(recent) :] if recent else ()
    if lines and len(lines[0]) > RECENT_CHARS:
        lines = ("…" + lines[0][-RECENT_CHARS:], *lines[1:])
    return lines
