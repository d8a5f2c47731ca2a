"""Compaction jobs: pack the oldest uncovered turns of a path into an episode, and fold the episodes
beyond `episodes_kept` into the five-section digest.

With a side model the summaries are written by it (prompts in `summary_prompts.py`, in the story's
language); without one, or when
its answer is unusable, nothing is invented: the offline extractive summarizer fills the same shapes.
Covered passages are handed to the archive before they are summarized (the seam for recall).
Jobs of one story run one at a time (the job system's rule), so a path is never packed twice at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, Protocol, TypeVar
from uuid import UUID, uuid4

from domain.application import Changji
from domain.card.anchor import ANCHOR_TEXTS
from domain.ports import ChatModel, ModelCallError
from domain.texts import CONTEXT_TEXTS
from domain.tree.commands.compaction import CompactionPlan
from domain.tree.commands.jobs import SideCall
from domain.tree.jobs import JOBS
from domain.tree.rules.compaction import episodes_to_fold, summary_chars
from domain.tree.rules.extractive import EPISODE_CHARS, Line, digest_budget, fold_digest, summarize_episode
from domain.tree.rules.summary_checks import Failure, check_digest, check_episode, in_english, without_banned
from domain.values import DIGEST_SECTIONS, CallPurpose, JobKind, NodeView, SummaryAuthor
from projections.context.scene import format_state
from projections.context.system_prompt import fill_macros
from projections.read_models.scenes import SceneAt
from schedulers.outcomes import Done, Failed, Outcome
from schedulers.workers.summary_prompts import (
    SUMMARY_PROMPTS,
    answered_sections,
    digest_markdown,
    digest_system,
    parse_sections,
)
from service.executor import W

P = ParamSpec("P")
T = TypeVar("T")

EPISODE_TOKENS, DIGEST_TOKENS = 1024, 4096
LATEST_TURNS = 2  # raw turns shown to the digest for 当前场景
CHECKED_ATTEMPTS = 2  # a side model's summary that fails its checks is asked for once more
_LIST_SEP = {"zh": "、", "en": ", "}
PATH_BATCH = 1000  # nodes a plan's walk reads in bulk per hold of the domain (`CompactWorker._read_path`)


def new_id() -> str:
    """An id for a new episode or digest (the node it annotates is what places it)."""
    return uuid4().hex[:12]


class Archive(Protocol):
    """Where covered passages go before they are summarized (the recall index, when there is one)."""

    async def archive(self, story_id: UUID, passages: Sequence[NodeView]) -> None: ...


class NoArchive:
    async def archive(self, story_id: UUID, passages: Sequence[NodeView]) -> None:
        return None


class Runs(Protocol):
    """Where the worker's domain calls run: the service's `Executor`, or `Inline`."""

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W: ...
    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...


class Inline:
    """Runs every call on the caller's thread: for compacting from a script or a test without the service."""

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W:
        return fn(*args, **kwargs)

    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return fn(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class Packed:
    """One episode a compaction recorded: its turns and the node it annotates."""

    first_turn: int
    last_turn: int
    node_id: UUID


@dataclass(frozen=True, slots=True)
class Compacted:
    """What a compaction did: the episodes it packed and the digest fold it made (if any)."""

    episodes: tuple[Packed, ...] = ()
    digest: tuple[int, UUID] | None = None  # (the last turn it covers, the node it annotates)
    rejected: tuple[str, ...] = ()  # the side model's summaries that failed their checks twice, and why

    @property
    def nothing_due(self) -> bool:
        return not self.episodes and self.digest is None

    @property
    def detail(self) -> str:
        """What it did, in a line (a job's outcome detail)."""
        done = []
        if len(self.episodes) == 1:
            only = self.episodes[0]
            done.append(f"episode of turns {only.first_turn}–{only.last_turn} on {only.node_id}")
        elif self.episodes:
            done.append(
                f"{len(self.episodes)} episodes of turns {self.episodes[0].first_turn}–{self.episodes[-1].last_turn}"
            )
        if self.digest is not None:
            done.append(f"digest through turn {self.digest[0]} on {self.digest[1]}")
        return "; ".join([*done, *self.rejected]) or "nothing due"


def _with(error: str, rejected: Sequence[str]) -> str:
    """A failure's error, with what the same run's checks rejected before it (the job keeps only the error)."""
    return "; ".join([error, *rejected])


def lines_of(nodes: Sequence[NodeView], char: str, user: str) -> list[Line]:
    return [
        Line(user if n.kind == "user" else char, fill_macros(n.text, char, user), n.turn)
        for n in nodes
        if not n.hidden and n.text.strip()
    ]


@dataclass(frozen=True, slots=True)
class Asked:
    """The side model's answer to a summary request: its text (None: failed, or rejected twice), the
    calls it took, the last call's outcome, and the failures of a summary rejected twice."""

    text: str | None = None
    calls: tuple[SideCall, ...] = ()
    outcome: str = "ok"
    rejected: tuple[Failure, ...] = ()

    @property
    def last(self) -> SideCall | None:
        return self.calls[-1] if self.calls else None

    @property
    def note(self) -> str:
        """What the job says of a rejected summary: rejected twice, or rejected and then not answered."""
        if self.outcome == "rejected":
            return f"failed its checks twice ({in_english(self.rejected)}): the offline summary stands in"
        return (
            f"failed its checks ({in_english(self.rejected)}) and the second ask failed ({self.outcome}):"
            " the offline summary stands in"
        )


class CompactWorker:
    kind: JobKind = "compact"
    skip_reason = None  # the offline summarizer always works

    def __init__(
        self,
        app: Changji,
        runs: Runs,
        model: ChatModel | None,
        scene_of: Callable[[UUID], SceneAt | None] | None = None,
        archive: Archive | None = None,
        max_attempts: int | None = None,
        path_of: Callable[[UUID], Awaitable[Sequence[UUID]]] | None = None,
    ) -> None:
        """`scene_of`: the scene at a node, shown to the side model as auxiliary evidence (None: none).
        `max_attempts`: the job system's attempts per job — the last one is offline, whatever
        `fallback_after` says, so a compaction never fails for good while the offline way works.
        `path_of`: the ids of a node and the nodes above it, leaf first, from the read models (None:
        a plan's walk reads the nodes this process does not hold one by one)."""
        self.app, self.runs, self.model, self.archive = app, runs, model, archive or NoArchive()
        self.scene_of, self.path_of = scene_of, path_of
        after = JOBS["compact"].fallback_after  # failed attempts before the offline summarizer
        if max_attempts is not None:
            after = max_attempts - 1 if after is None else min(after, max_attempts - 1)
        self.offline_after = after
        self._locks: dict[UUID, asyncio.Lock] = {}

    async def run(self, job: Mapping[str, Any]) -> Outcome:
        node_id = UUID(job["node_id"])
        offline = self.offline_after is not None and int(job["attempts"]) >= self.offline_after
        budget = await self.runs.load(self.app.compaction.compaction_reason, node_id) == "budget"
        done = await self.compact(node_id, manual=False, job_node=node_id, offline=offline, budget=budget)
        if isinstance(done, Failed):
            return done
        await self.runs.write(self.app.jobs.finish_job, node_id, self.kind, done.detail)
        return Done()

    async def compact(
        self, node_id: UUID, manual: bool, job_node: UUID | None, offline: bool = True, budget: bool = False
    ) -> Compacted | Failed:
        """Bring a path's summaries up to date: pack if due (or, `manual`, everything but the last
        keep_turns), then fold episodes beyond episodes_kept. Returns what it did. When the side model
        fails, the offline summarizer stands in if `offline`, else the failure is returned (to retry).
        One compaction per story at a time (a manual one and a job never pack the same turns twice)."""
        story_id = (await self.runs.load(self.app.node, node_id)).story_id
        async with self._locks.setdefault(story_id, asyncio.Lock()):
            return await self._compact(node_id, manual, job_node, offline, budget)

    async def _compact(
        self, node_id: UUID, manual: bool, job_node: UUID | None, offline: bool, budget: bool
    ) -> Compacted | Failed:
        """Pack and fold until nothing is due: a path that fell behind (compaction just switched on, a
        long outage) is brought up to date by one job, one pack and at most one fold at a time."""
        commands, runs = self.app.compaction, self.runs
        await self._read_path(node_id)
        plan = await runs.load(commands.plan_compaction, node_id, manual)
        if plan.pack is None and budget:  # the context overflowed before a pack was due: pack all but N
            plan = await runs.load(commands.plan_compaction, node_id, True)
        packed: list[Packed] = []
        digest: tuple[int, UUID] | None = None
        rejected: list[str] = []
        while True:
            if plan.pack is not None:
                await self.archive.archive(plan.story_id, plan.pack.nodes)
                text, author, asked = await self._episode(plan, offline)
                if text is None:
                    return Failed(_with(f"the episode summary failed ({asked.outcome})", rejected), asked.last)
                await runs.write(commands.record_episode, new_id(), plan.pack, text, author, job_node, asked.calls)
                packed.append(Packed(plan.pack.first_turn, plan.pack.last_turn, plan.pack.end.id))
                if asked.rejected:
                    rejected.append(f"the episode of turns {plan.pack.first_turn}–{plan.pack.last_turn} {asked.note}")
                plan = await runs.load(commands.plan_compaction, node_id, False)
            folded = episodes_to_fold(plan.layers, plan.settings)
            if folded:
                sections, author, asked = await self._digest(plan, offline)
                if sections is None:
                    return Failed(_with(f"the digest failed ({asked.outcome})", rejected), asked.last)
                layers, settings, calls = plan.layers, plan.settings, asked.calls
                await runs.write(commands.record_digest, new_id(), layers, settings, sections, author, job_node, calls)
                digest = (folded[-1][1].last_turn, folded[-1][0].id)
                if asked.rejected:
                    rejected.append(f"the digest through turn {digest[0]} {asked.note}")
                plan = await runs.load(commands.plan_compaction, node_id, False)
            if plan.pack is None:
                return Compacted(tuple(packed), digest, tuple(rejected))

    async def _read_path(self, node_id: UUID) -> None:
        """Read in bulk the nodes a plan walks that this process does not hold (a story imported, or
        played with compaction off, then compacted after a start: its whole path), PATH_BATCH at a
        time, so the domain is held for one batch at a time and each batch reads the store in a few
        queries; until the walk to the summary boundary finds every node held."""
        if self.path_of is None:
            return
        first = await self.runs.load(self.app.compaction.first_unheld, node_id)
        if first is None:
            return
        ids = await self.path_of(first)
        for start in range(0, len(ids), PATH_BATCH):
            await self.runs.load(self.app.preload, ids[start : start + PATH_BATCH])
            if await self.runs.load(self.app.compaction.first_unheld, node_id) is None:
                return

    async def _episode(self, plan: CompactionPlan, offline: bool) -> tuple[str | None, SummaryAuthor, Asked]:
        assert plan.pack is not None
        lines = lines_of(plan.pack.nodes, plan.char_name, plan.user_name)
        names = self._names(plan)
        scene = await self._scene(plan.pack.end.id)
        names += self._roster(scene)  # (the offline summary favours sentences that name them)
        if self.model is None:
            return await self._offline_episode(lines, names, plan), "extractive", Asked()
        prompts = SUMMARY_PROMPTS[plan.language]
        body = "\n\n".join(prompts.said.format(speaker=line.speaker, text=line.text) for line in lines)
        user = prompts.transcript.format(first=plan.pack.first_turn, last=plan.pack.last_turn) + f"\n{body}"
        if scene is not None:
            user += f"\n\n{prompts.ledger}\n{format_state(scene.snapshot, CONTEXT_TEXTS[plan.language])}"
        messages = [
            {"role": "system", "content": self._anchored(prompts.episode, plan)},
            {"role": "user", "content": user},
        ]
        covered, banned = "\n".join(line.text for line in lines), plan.settings.banned_patterns
        asked = await self._checked(
            "episode", messages, EPISODE_TOKENS, lambda text: check_episode(text, covered, banned, plan.language), plan
        )
        if asked.text is None and (offline or asked.rejected):  # failing, or failing its checks: offline stands in
            return await self._offline_episode(lines, names, plan), "extractive", asked
        return asked.text, "model", asked

    async def _offline_episode(self, lines: list[Line], names: list[str], plan: CompactionPlan) -> str:
        """The extractive summary, on a thread: a pack of a long story's backlog (thousands of turns)
        takes a while, and the event loop serves requests meanwhile."""
        chars, language, banned = self._episode_chars(plan), plan.language, plan.settings.banned_patterns
        text = await asyncio.to_thread(lambda: without_banned(summarize_episode(lines, names, chars, language), banned))
        return text or SUMMARY_PROMPTS[language].nothing

    async def _digest(self, plan: CompactionPlan, offline: bool) -> tuple[dict[str, str] | None, SummaryAuthor, Asked]:
        folded = episodes_to_fold(plan.layers, plan.settings)
        previous = dict(plan.layers.digest[1].sections) if plan.layers.digest else None
        last_node = folded[-1][0]
        latest = await self.runs.load(self._latest_turns, last_node.id)
        lines = lines_of(latest, plan.char_name, plan.user_name)
        scene = await self._scene(last_node.id)
        language = plan.language
        scene_text = format_state(scene.snapshot, CONTEXT_TEXTS[language]) if scene else ""
        episodes = [(e.first_turn, e.last_turn, e.text) for _, e in folded]
        budget = min(digest_budget(plan.settings.episodes_kept), summary_chars(plan.settings))
        names = self._names(plan)  # (人物 has a line for each: the card's and the user's, not the roster's)
        banned = plan.settings.banned_patterns
        fallback = await asyncio.to_thread(
            lambda: {  # (it copies sentences from the turns: what drifted into a banned pattern is put out)
                name: without_banned(body, banned)
                for name, body in fold_digest(previous, episodes, lines, names, scene_text, budget, language).items()
            }
        )
        if self.model is None:
            return fallback, "extractive", Asked()
        prompts, parts = SUMMARY_PROMPTS[language], []
        if previous:
            parts.append(f"{prompts.previous}\n{digest_markdown(previous, language)}")
        labelled = (f"{prompts.episode_label.format(first=a, last=b)}\n{t}" for a, b, t in episodes)
        parts.append(f"{prompts.episodes}\n" + "\n\n".join(labelled))
        said = (prompts.said.format(speaker=line.speaker, text=line.text) for line in lines)
        parts.append(f"{prompts.latest}\n" + "\n\n".join(said))
        if scene_text:
            parts.append(f"{prompts.ledger}\n{scene_text}")
        messages = [
            {"role": "system", "content": self._anchored(digest_system(language, plan.user_name, budget), plan)},
            {"role": "user", "content": "\n\n".join(parts) + f"\n\n{prompts.ask_digest}"},
        ]
        latest_text = "\n".join([*(line.text for line in lines), scene_text])
        sources = "\n".join([*(previous or {}).values(), *(t for _, _, t in episodes), latest_text, plan.anchor])
        known = [*names, *self._roster(scene)]
        location = scene.snapshot.location if scene else ""

        def check(text: str) -> list[Failure]:
            answered = answered_sections(text)
            if not answered:
                return [Failure("missing", (("sections", tuple(DIGEST_SECTIONS)),))]
            return check_digest(answered, latest_text, sources, known, banned, budget, location)

        asked = await self._checked("digest", messages, DIGEST_TOKENS, check, plan)
        sections = parse_sections(asked.text, previous) if asked.text is not None else None
        if sections is not None:
            return sections, "model", asked
        return (fallback, "extractive", asked) if offline or asked.rejected else (None, "model", asked)

    async def _checked(
        self,
        purpose: CallPurpose,
        messages: list[dict[str, str]],
        max_tokens: int,
        check: Callable[[str], list[Failure]],
        plan: CompactionPlan,
    ) -> Asked:
        """The side model's summary, checked (`domain/tree/rules/summary_checks.py`): one that fails is
        asked for again with the reasons, in the story's language; failing twice, none (`rejected` says
        why, and the offline summary stands in). A call that fails is returned as it failed (to retry)."""
        prompts, calls = SUMMARY_PROMPTS[plan.language], []
        rejected: tuple[Failure, ...] = ()
        separator = "; " if plan.language == "en" else "；"
        for _ in range(CHECKED_ATTEMPTS):
            text, call = await self._call(purpose, messages, max_tokens)
            calls.append(call)
            if text is None:  # (after a rejection too: the rejection stands, and the offline summary)
                return Asked(None, tuple(calls), call.outcome, rejected)
            failures = await asyncio.to_thread(check, text)  # (regular expressions: off the event loop)
            if not failures:
                return Asked(text, tuple(calls))
            calls[-1], rejected = replace(call, outcome="rejected"), tuple(failures)
            headings = CONTEXT_TEXTS[plan.language].digest_headings
            reasons = separator.join(
                failure.words(prompts.failures, headings, _LIST_SEP[plan.language]) for failure in failures
            )
            messages = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": prompts.rejected.format(reasons=reasons)},
            ]
        return Asked(None, tuple(calls), "rejected", rejected)

    @staticmethod
    def _anchored(instructions: str, plan: CompactionPlan) -> str:
        """The summarizer's instructions with the character's identity anchor after them."""
        if not plan.anchor.strip():
            return instructions
        char = plan.char_name
        rule = ANCHOR_TEXTS[plan.language].summary_rule.format(
            char=char, anchor=fill_macros(plan.anchor.strip(), char, plan.user_name)
        )
        return f"{instructions}\n\n{rule}"

    def _latest_turns(self, node_id: UUID) -> list[NodeView]:
        """The last LATEST_TURNS turns up to a node (root→leaf order), for 当前场景."""
        out: list[NodeView] = []
        users = 0
        current: UUID | None = node_id
        while current is not None and users < LATEST_TURNS:
            node = self.app.node(current)
            out.append(node)
            users += node.kind == "user"
            current = node.parent_id
        return out[::-1]

    @staticmethod
    def _episode_chars(plan: CompactionPlan) -> int:
        """An offline episode's room: its usual size, less under a small prompt budget (the digest and the
        kept episodes share `summary_chars`)."""
        return min(EPISODE_CHARS, summary_chars(plan.settings) // (plan.settings.episodes_kept + 2))

    @staticmethod
    def _names(plan: CompactionPlan) -> list[str]:
        return [plan.char_name, plan.user_name]

    @staticmethod
    def _roster(scene: SceneAt | None) -> list[str]:
        """The characters, places and things the scene's roster has met by then."""
        if scene is None:
            return []
        return [*scene.roster.characters, *scene.roster.places, *scene.roster.items]

    async def _scene(self, node_id: UUID) -> SceneAt | None:
        return await self.runs.load(self.scene_of, node_id) if self.scene_of is not None else None

    async def _call(
        self, purpose: CallPurpose, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str | None, SideCall]:
        assert self.model is not None
        started = time.perf_counter()
        try:
            result = await self.model.chat(messages, max_tokens=max_tokens)
        except ModelCallError as failure:
            elapsed = (time.perf_counter() - started) * 1000
            return None, SideCall(purpose, self.model.model, 0, 0, elapsed, failure.outcome)
        elapsed = (time.perf_counter() - started) * 1000
        call = SideCall(
            purpose, result.model or self.model.model, result.prompt_tokens or 0, result.completion_tokens or 0,
            elapsed, "ok",
        )  # fmt: skip
        return (result.text if result.text.strip() else None), call
