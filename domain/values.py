"""Value objects shared by aggregates and projections."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from domain.language import Language, LanguageChoice, resolve_language

BANNED_SECONDS = 0.02  # a banned pattern's time limit per reply searched

NodeKind = Literal["greeting", "user", "reply"]
Phase = Literal["final", "writing", "waiting", "sealed", "stopped", "withdrawn"]
"""`final`: written whole (greeting, user words, a posted reply); the rest are an engine reply's stages."""

# --- the closed sets stored in events (events are forever: values may be added, never renamed) ----

LeafCause = Literal["start", "append", "checkout", "turn", "regenerate", "restore", "revision", "import"]
SceneAuthor = Literal["scribe", "user"]
SummaryAuthor = Literal["model", "extractive"]
"""`model`: written by the side model; `extractive`: by the offline summarizer."""
CompactionReason = Literal["auto", "behind", "budget"]
"""`auto`: the path just became due; `behind`: still uncovered packs later; `budget`: a context overflowed."""
StopReason = Literal["stopped", "disconnected", "shutdown", "runaway", "empty", "error", "tool_calls"]
CallPurpose = Literal["turn", "scribe", "episode", "digest", "search"]
JobKind = Literal["scribe", "compact"]
"""Kinds of background work; `domain/tree/jobs.py` declares what makes each due."""
JobState = Literal["pending", "retrying", "done", "skipped", "failed"]


# the tokens `recall_share` gives the 【剧情记忆】 block at most (a larger recall_tokens gives more)
RECALL_ROOM_MOST = 4096


class StorySettings(BaseModel):
    """Memory and context settings: a card sets the defaults, a story may override any of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keep_turns: int = Field(6, ge=1, le=1000, description="turns always kept word for word")
    pack_turns: int = Field(30, ge=0, le=1000, description="turns per summary pack; 0 disables compaction")
    episodes_kept: int = Field(3, ge=0, le=100, description="episode summaries kept before folding")
    min_pack_chars: int = Field(2000, ge=0, le=1_000_000)
    context_window: int = Field(32768, ge=512, le=4_000_000, description="model window in tokens")
    reply_reserve: int = Field(4096, ge=0, le=1_000_000, description="tokens kept free for the reply")
    recall_k: int = Field(
        30,
        ge=0,
        le=50,
        description="at most this many passages recalled per turn from outside the window, as many as fit its room"
        " (budget the window cannot use takes up to 20 more); 0 = off",
    )
    fill_window: bool = Field(True, description="show summarized turns word for word again while the budget has room")
    recall_tokens: int = Field(
        1024,
        ge=0,
        le=1_000_000,
        description="tokens the 【剧情记忆】 block may take at least (0 = no recall), and what the window leaves unused",
    )
    recall_share: float = Field(
        0.375,
        ge=0,
        le=0.5,
        description="the share of the prompt's tokens (context_window − reply_reserve) the 【剧情记忆】 block may take,"
        " up to 4,096 tokens, where that is more than recall_tokens (measured on LoCoMo: at 4k–16k, more evidence"
        " than a fixed share)",
    )
    recall_summaries: bool = Field(
        False,
        description="the per-turn recall brings back episode summaries too (those not in the context), beside turns"
        " (off: measured on LoCoMo with the offline summaries, they cost 1–4 points of evidence word for word)",
    )
    recall_rewrite: bool = Field(
        False,
        description="where a side model is configured, it writes the user's words as a search of the story's memory"
        " before each turn that recalls (one more call a turn, in the cost ledger); recall ranks both",
    )
    user_name: str = Field("User", min_length=1, max_length=100, description="fills {{user}}")
    lore_bodies: Literal["auto", "titles", "full"] = Field(
        "auto",
        description="lore hits in the context: by title (the model looks them up with lorebook_search) or in full;"
        " auto = in full when the main model has no tools (bring-your-own mode), by title in engine mode",
    )
    lore_budget: int = Field(
        25, ge=1, le=100, description="the share of the context's budget, in percent, lore entries may take (constant"
        " entries and this turn's hits, as the context shows them); a hit past it is left out (SillyTavern's"
        " world_info_budget)",
    )  # fmt: skip
    lore_tokens: int = Field(
        0, ge=0, le=1_000_000, description="the most tokens lore entries take in a context, whatever the share"
        " (SillyTavern's budget cap); 0 = the share alone",
    )  # fmt: skip
    lore_min_activations: int = Field(
        0, ge=0, le=100, description="while fewer lore entries are in, the scan goes one message deeper; 0 = off"
    )
    lore_min_depth: int = Field(
        0, ge=0, le=1000, description="how deep the minimum of activations may scan, in messages; 0 = the window"
    )
    lore_write_gate: bool = Field(
        False,
        description="hold the model's lorebook_write entries for the user's approval, unless the user's words "
        "asked to record",
    )
    language: LanguageChoice = Field(
        "auto", description="the language of changji's own prompt texts: zh, en, or auto (from the card's text)"
    )
    proxy_budget: Literal["auto", "client", "story"] = Field(
        "auto",
        description="what a proxied request's context may hold: no more tokens than the front end sent (client),"
        " or the story's own window (story); auto = the service's choice (CHANGJI_PROXY_BUDGET, client unless set)",
    )

    card_memory: bool = Field(
        True,
        description="the card's memory: this story is recapped into its card's memory, and its contexts carry the"
        " card's resident summary (what the card's earlier stories left)",
    )
    recap_turns: int = Field(
        40, ge=1, le=100_000, description="a story being played is recapped into its card's memory after this many"
        " new turns, even without a quiet spell",
    )  # fmt: skip
    recap_quiet_minutes: float = Field(
        10, ge=0, le=100_000, description="a story that changed is recapped into its card's memory after this many"
        " minutes of quiet",
    )  # fmt: skip

    identity_anchor: str = Field(
        "", max_length=4000, description="who the character is and the iron rules it keeps, word for word in"
        " re-anchoring blocks, at the head of the digest and in the summarizers' instructions; empty = derived from"
        " the card's description, personality and post-history instructions",
    )  # fmt: skip
    reanchor_turns: int = Field(
        15, ge=0, le=10_000, description="every this many turns the user's words carry the identity anchor again;"
        " 0 = off (drift still forces one)",
    )  # fmt: skip
    banned_patterns: tuple[str, ...] = Field(
        (), max_length=50, description="regular expressions no reply should match (each searched for at most"
        f" {BANNED_SECONDS * 1000:.0f} ms); a match of some words is a drift signal (an empty match is none)",
    )  # fmt: skip
    drift_creep: float = Field(
        2.2, ge=0, le=100, description="drift: the last replies' median length against the character's first"
        " replies; 0 = off",
    )  # fmt: skip
    drift_repeat: int = Field(
        2, ge=0, le=1000, description="drift: how many phrases of the last reply (five words, eight characters in"
        " Chinese) found in two or more of the four replies before it make the signal; 0 = off",
    )  # fmt: skip
    drift_language: float = Field(
        0.6, ge=0, le=1, description="drift: the share of the last two replies' words not in the card's language;"
        " 0 = off",
    )  # fmt: skip
    drift_echo: float = Field(
        0.6, ge=0, le=1, description="drift: the share of the user's phrases the reply repeats back; 0 = off"
    )

    @field_validator("banned_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(regular_expressions(patterns))

    @property
    def recall_room(self) -> int:
        """The tokens the 【剧情记忆】 block may take from the window's share: `recall_tokens`, or
        `recall_share` of the prompt's tokens (up to `RECALL_ROOM_MOST`) where that is more (0: no recall)."""
        if not self.recall_tokens:
            return 0
        share = int(self.recall_share * max(self.context_window - self.reply_reserve, 0))
        return max(self.recall_tokens, min(share, RECALL_ROOM_MOST))

    def merged(self, overrides: dict[str, Any]) -> StorySettings:
        return StorySettings.model_validate({**self.model_dump(), **overrides})


def regular_expressions(patterns: Sequence[str]) -> Sequence[str]:
    """The patterns, each checked to be a regular expression of 1–500 characters (ValueError naming the first
    that is not)."""
    for i, pattern in enumerate(patterns):
        if not pattern or len(pattern) > 500:
            raise ValueError(f"pattern {i}: between 1 and 500 characters")
        try:
            regex.compile(pattern, regex.IGNORECASE)
        except (regex.error, ValueError, OverflowError, RecursionError) as error:
            raise ValueError(f"pattern {i} is not a regular expression: {error}") from None
    return patterns


class CardData(BaseModel):
    """The Character Card V2 core fields; unknown fields and `extensions` are kept verbatim."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=200_000)
    personality: str = Field("", max_length=50_000)
    scenario: str = Field("", max_length=50_000)
    first_mes: str = Field("", max_length=100_000)
    alternate_greetings: list[str] = Field(default_factory=list, max_length=100)
    mes_example: str = Field("", max_length=100_000)
    system_prompt: str = Field("", max_length=100_000)
    post_history_instructions: str = Field("", max_length=50_000)
    creator_notes: str = Field("", max_length=100_000)
    tags: list[str] = Field(default_factory=list, max_length=200)
    creator: str = Field("", max_length=200)
    character_version: str = Field("", max_length=100)
    extensions: dict[str, Any] = Field(default_factory=dict)

    def greeting(self, index: int) -> str:
        """0 is first_mes; n is alternate_greetings[n-1]."""
        return self.first_mes if index == 0 else self.alternate_greetings[index - 1]

    @property
    def greeting_count(self) -> int:
        return 1 + len(self.alternate_greetings)

    def language(self, choice: LanguageChoice = "auto") -> Language:
        """The language of changji's prompt texts for this card: `choice`, or detected from its text."""
        return resolve_language(choice, self.name, self.description, self.personality, self.scenario, self.first_mes)


@dataclass(frozen=True, slots=True)
class Prelude:
    """What an earlier story left, carried into a story's opening: its recap, and where it was read."""

    from_story_id: UUID
    from_node_id: UUID
    text: str


@dataclass(frozen=True, slots=True)
class Episode:
    """A summary of one pack of turns, annotating the last node it covers (depths start_depth…that node)."""

    episode_id: str
    start_id: UUID
    after_id: UUID | None
    start_depth: int
    first_turn: int
    last_turn: int
    text: str
    anchors: tuple[UUID, ...]
    author: str
    edited: bool = False


DIGEST_SECTIONS = ("前情提要", "人物", "承诺与伏笔", "事实账", "当前场景")


@dataclass(frozen=True, slots=True)
class Digest:
    """The story digest covering the path from the root down to the node it annotates."""

    digest_id: str
    previous_id: UUID | None
    absorbed: tuple[str, ...]
    last_turn: int
    sections: tuple[tuple[str, str], ...]
    anchors: tuple[UUID, ...]
    author: str
    edited: bool = False

    def text(self, headings: Mapping[str, str] | None = None) -> str:
        """The sections as the model reads them, each under its heading (`headings`: by section name)."""
        return "\n\n".join(
            f"## {(headings or {}).get(name, name)}\n{body.strip()}" for name, body in self.sections if body.strip()
        )


@dataclass(frozen=True, slots=True)
class NodeView:
    """What projections need of one node: immutable, cheap to share between requests."""

    id: UUID
    story_id: UUID
    parent_id: UUID | None
    kind: NodeKind
    depth: int
    turn: int
    text: str
    hidden: bool
    starred: bool
    revisions: int
    phase: Phase
    draft_version: int
    version: int
    created_at: datetime
    episode: Episode | None = None
    digest: Digest | None = None
    client_part: str | None = None  # a proxied front end's own part of the request a reply answers (a blob)
    # the side model's search of the memory for a user node's words ("": none; None: not asked)
    search_terms: str | None = None


@dataclass(frozen=True, slots=True)
class Recollection:
    """A passage of the story's memory found for the main model's `memory_search`: its node (the reply of
    its turn, or the last node of an episode summary), its kind, and the line the model is shown (turn
    label, who said what)."""

    node_id: UUID
    kind: Literal["turn", "episode"]
    line: str


@dataclass(frozen=True, slots=True)
class SavePoint:
    """A named position on the tree, grouped into world lines."""

    id: str
    name: str
    node_id: UUID
    worldline_id: str
    worldline_name: str
    parent_save_id: str | None
    fork_from_save_id: str | None
    created_at: datetime
