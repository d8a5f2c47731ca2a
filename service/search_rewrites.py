"""The side model's search of a story's memory: before a turn that recalls, the user's words (with the turn
before them, so that "she" and "that ring" can be named) are written as one line of search terms — the
people, places, things and events they ask about, synonyms and concrete examples an earlier turn may have
used instead — and recall ranks that line beside the words themselves (`StoryIndex.search`).

Asked only where a card or story sets `recall_rewrite`, a side model is configured and the context the
words get would recall (assembled as it will be, recall aside: some of its path lies outside its window;
before that, everything is word for word and nothing is recalled); waited for at most `seconds`, after
which the turn goes on by the words alone. The call is recorded in the user node's cost ledger (purpose
`search`) and the line on the node (`SearchTermsNoted`), so every later context at that node — a regenerate, a swipe, a read
of the context — ranks the same line without asking again; an answer that cannot be a search (empty, a
JSON object) or none in time is noted as no terms (""), its call kept as `rejected` or `timeout`, and the
words are not asked about again. A proxied request notes them once its turn is written: one whose
upstream fails first leaves nothing behind, this call included (as it leaves no reply).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from uuid import UUID

from domain.application import Changji
from domain.language import Language
from domain.ports import ChatModel, ModelCallError
from domain.tree.commands.jobs import SideCall
from domain.values import NodeView
from service.executor import Executor
from service.views import StoryViews

log = logging.getLogger("service.recall")
SEARCH_CHARS = 400  # a search line is cut to this many characters (at a space where there is one)
SAID_CHARS = 600  # each message of the turn before the words, shown up to this many characters
MAX_TOKENS = 120
THOUGHT_ENDS = re.compile(r"</\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)
THOUGHT_BEGINS = re.compile(r"<\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)
FENCE = re.compile(r"^`{3,}\w*$")
MARKUP = "\"'“”「」`*#>-•· "
LABEL = re.compile(r"^(search terms|search|terms|keywords|query|检索词|关键词|搜索词)\s*[:：]\s*", re.IGNORECASE)

PROMPTS: dict[Language, dict[str, str]] = {
    "zh": {
        "system": "你为一场角色扮演检索记忆。阅读【上一轮】和【用户这句话】，写出一行检索词：这句话问到或提到的人物、"
        "地点、物品和事件，代词换成它指的名字，再加上旧对话里可能用来说同一件事的近义词和具体例子。"
        "只输出这一行，词与词之间用空格隔开，不超过40个词，不要解释。",
        "before": "【上一轮】",
        "words": "【用户这句话】",
    },
    "en": {
        "system": "You search the memory of a role-play. Read [THE TURN BEFORE] and [THE USER'S WORDS] and write "
        "one line of search terms: the people, places, things and events the words ask about or mention, "
        "pronouns replaced by the names they stand for, and the synonyms and concrete examples an earlier "
        "turn may have used for the same thing. Output that one line only, terms separated by spaces, at most "
        "40 terms, no explanation.",
        "before": "[THE TURN BEFORE]",
        "words": "[THE USER'S WORDS]",
    },
}


@dataclass(frozen=True, slots=True)
class Rewritten:
    """The side model's answer: the search line ("": it gave none that can be used, or none in time) and its
    call."""

    terms: str
    call: SideCall


def search_line(answer: str) -> str | None:
    """The search in a side model's answer: its first line with words (a thinking block and a label such as
    "Search terms:" left out), cut to `SEARCH_CHARS`; None for an answer that holds none or is a JSON object
    (a model answering another task)."""
    kept = (ln.strip() for ln in _thoughts_out(answer).splitlines() if not FENCE.match(ln.strip()))
    lines = (LABEL.sub("", ln.strip(MARKUP)).strip(MARKUP) for ln in kept)
    line = next((ln for ln in lines if ln and not ln.endswith((":", "："))), "")
    if not line or line.startswith(("{", "[")):
        return None
    if len(line) > SEARCH_CHARS:
        cut = line.rfind(" ", 0, SEARCH_CHARS)
        line = line[: cut if cut > SEARCH_CHARS // 2 else SEARCH_CHARS].strip()
    return line or None


class SearchRewrites:
    def __init__(
        self, app: Changji, executor: Executor, views: StoryViews, model: ChatModel | None, seconds: float
    ) -> None:
        self.app, self.executor, self.views, self.model, self.seconds = app, executor, views, model, seconds

    async def rewrite(self, tenant_id: str, node: NodeView, recalls: Callable[[], bool]) -> NodeView:
        """A saved user node's search, asked and noted on it when the story wants one and it was never asked
        for (`recalls`: whether the context its words get recalls); the node as it stands after. Never fails:
        the turn goes on by the words."""
        if self.model is None or node.kind != "user" or node.search_terms is not None:
            return node
        rewritten = await self.ask(tenant_id, node, recalls)
        if rewritten is None:
            return node
        return await self.note(tenant_id, node.id, rewritten) or node

    async def ask(
        self,
        tenant_id: str,
        node: NodeView,
        recalls: Callable[[], bool],
        node_of: Callable[[UUID], NodeView] | None = None,
    ) -> Rewritten | None:
        """The side model's search for the words of `node` (a user node, saved or about to be: `node_of` reads
        the nodes above it, those not saved yet too); None when not asked (no side model, the setting off,
        the context would not recall — `recalls`, run with the story's other reads —, the words empty, the
        story gone)."""
        if self.model is None or node.kind != "user" or not node.text.strip():
            return None
        try:
            messages = await self.executor.load(self._messages, tenant_id, node, recalls, node_of or self.app.node)
        except Exception as exc:  # (a story deleted meanwhile: the turn's own write reports it)
            log.warning("the side model's search was not asked (%s): recall goes by the words", exc)
            return None
        if messages is None:
            return None
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(self.model.chat(messages, max_tokens=MAX_TOKENS), self.seconds)
        except Exception as failure:  # (none stops the turn)
            outcome = failure.outcome if isinstance(failure, ModelCallError) else "timeout"
            outcome = outcome if isinstance(failure, ModelCallError | TimeoutError) else "error"
            log.info("the side model's search for a turn's recall failed (%s): recall goes by the words", outcome)
            return Rewritten("", SideCall("search", self.model.model, 0, 0, _ms(started), outcome))
        terms = search_line(result.text)
        call = SideCall(
            "search", result.model or self.model.model, result.prompt_tokens or 0, result.completion_tokens or 0,
            _ms(started), "ok" if terms is not None else "rejected",
        )  # fmt: skip
        return Rewritten(terms or "", call)

    async def note(self, tenant_id: str, node_id: UUID, rewritten: Rewritten) -> NodeView | None:
        """The call in the node's ledger and the search on it (None: the node could not be written)."""
        try:
            written = await self.executor.write(
                self.app.nodes.note_search_terms, tenant_id, node_id, rewritten.terms, rewritten.call
            )
        except Exception as exc:  # (a node deleted meanwhile: the turn goes on; nothing else depends on it)
            log.warning("the side model's search was not noted on %s (%s)", node_id, exc)
            return None
        return written.value

    @staticmethod
    def planned(node: NodeView, rewritten: Rewritten | None) -> NodeView:
        """A planned user node (not saved yet) with the search its context ranks."""
        return node if rewritten is None else replace(node, search_terms=rewritten.terms)

    def _messages(
        self, tenant_id: str, node: NodeView, recalls: Callable[[], bool], node_of: Callable[[UUID], NodeView]
    ) -> list[dict[str, str]] | None:
        story = self.app.story(tenant_id, node.story_id)
        settings = self.app.settings(story)
        if not settings.recall_rewrite or not settings.recall_k or not settings.recall_room or node.parent_id is None:
            return None
        if not recalls():
            return None
        texts = PROMPTS[self.app.language(story)]
        before: list[str] = []
        parent: UUID | None = node.parent_id
        for _ in range(2):  # the turn before: its reply and the words it answered
            if parent is None:
                break
            above = node_of(parent)
            if above.text.strip() and not above.hidden:
                before.insert(0, _clipped(above.text))
            parent = above.parent_id
        said = "\n".join(before)
        user = (
            f"{texts['before']}\n{said}\n\n{texts['words']}\n{node.text}" if said else f"{texts['words']}\n{node.text}"
        )
        return [{"role": "system", "content": texts["system"]}, {"role": "user", "content": user}]


def _thoughts_out(answer: str) -> str:
    """The answer after its thinking: past the last closing tag (a template may have opened it in the
    prompt), and before an opening one left unclosed (cut off while thinking)."""
    ends = list(THOUGHT_ENDS.finditer(answer))
    if ends:
        answer = answer[ends[-1].end() :]
    begins = THOUGHT_BEGINS.search(answer)
    return answer[: begins.start()] if begins else answer


def _clipped(text: str) -> str:
    """A message of the turn before, its end kept where it is long (what "she" and "it" most likely name)."""
    return text if len(text) <= SAID_CHARS else "…" + text[-(SAID_CHARS - 1) :]


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
