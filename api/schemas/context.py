"""What the model is given: the context with its explain list, the summary layers, recall and its index."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import MAX_TEXT, Strict


class MessageModel(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class LoreRefModel(BaseModel):
    book_id: str = Field(description="the lorebook (`embedded`: the card's own)")
    uid: int
    title: str
    key: str | None = Field(description="the key that fired it (None: a constant entry)")
    secondary: str | None = Field(description="the secondary key that satisfied its logic, if any")
    constant: bool
    left_out: Literal["budget", "probability", "group", "delay", "cooldown"] | None = Field(
        None, description="its key fired but it is not in the context: the lore budget was spent, its probability"
        " draw failed, another entry of its inclusion group won, the chat is shorter than its delay, or it is"
        " cooling down",
    )  # fmt: skip
    sticky: bool = Field(False, description="in because it is sticky (it came in a few messages ago), keys or not")
    detail: str | None = Field(None, description="why it was left out, in words")
    roll: float | None = Field(
        None, description="its probability draw (0–100; kept when below the entry's probability), where it had one"
    )


class MemoryRefModel(BaseModel):
    key: str = Field(description="the handbook item's id, or `<story id>:<n>` for the n-th line of a story's recap")
    kind: Literal["item", "recap"]
    sources: list[UUID] = Field(description="the stories behind it (`GET /v1/cards/{id}/memory/items/{item_id}`)")


class ExplainModel(BaseModel):
    what: str
    why: str
    node_ids: list[UUID]
    chars: int
    tokens: int
    message_index: int | None
    covers: list[int] | None = Field(
        None, description="summaries and cuts: the path depths [first, last] they stand for"
    )
    scores: list[float] = Field(default_factory=list, description="recall: each passage's fused score")
    span: list[int] | None = Field(
        None,
        description="where the block is: characters [start, end) of messages[message_index], counted in Unicode"
        " code points (as Python counts; a JavaScript client counting UTF-16 units must convert); a block over"
        " several messages (the verbatim turns) runs from start in message_index to end in end_message",
    )
    end_message: int | None = Field(None, description="the message the block ends in")
    lore: list[LoreRefModel] = Field(
        default_factory=list, description="lore (and the system prompt's constant lore): each entry and why"
    )
    version: int | None = Field(None, description="the resident summary: the version of the card's memory it is from")
    memory: list[MemoryRefModel] = Field(
        default_factory=list, description="recall from the card's memory: each passage and the stories behind it"
    )


class ContextResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    messages: list[MessageModel]
    explain: list[ExplainModel]
    tokens: int
    budget: int
    cut_turns: int = Field(description="how many whole turns the budget left out (this request only)")
    cut_nodes: int = Field(description="path nodes left out by the budget, the greeting included")
    language: Literal["zh", "en"] = Field(description="the language of changji's own texts in it")
    token_counter: str


class EpisodeModel(BaseModel):
    node_id: UUID = Field(description="the last node the episode covers (it annotates that node)")
    episode_id: str
    first_turn: int
    last_turn: int
    covers: list[int] = Field(description="the path depths [first, last] it stands for")
    text: str
    anchors: list[UUID]
    author: str = Field(description="model | extractive")
    edited: bool


class DigestModel(BaseModel):
    node_id: UUID = Field(description="the last node the digest covers (it annotates that node)")
    digest_id: str
    last_turn: int
    covers: list[int]
    sections: dict[str, str] = Field(description="前情提要 / 人物 / 承诺与伏笔 / 事实账 / 当前场景")
    absorbed: list[str]
    anchors: list[UUID]
    author: str
    edited: bool


class SummariesResponse(BaseModel):
    story_id: UUID
    at: UUID
    digest: DigestModel | None
    episodes: list[EpisodeModel] = Field(description="after the digest, oldest first")
    uncovered_turns: int = Field(description="turns below the last summary, word for word when they fit")


class CompactRequest(Strict):
    at: UUID | None = Field(None, description="compact the path to this node (default: the leaf)")


class CompactResponse(SummariesResponse):
    done: str = Field(description="what the compaction did")


class EditSummaryRequest(Strict):
    text: str | None = Field(None, min_length=1, max_length=MAX_TEXT, description="the episode's new text")
    sections: dict[str, str] | None = Field(None, description="digest sections to replace (others are kept)")


class FoundBy(BaseModel):
    rank: int = Field(description="the passage's rank in that retriever's list (1 = first)")
    score: float = Field(description="that retriever's own score (BM25, or cosine similarity)")


class RecallHitModel(BaseModel):
    passage_id: str
    kind: Literal["turn", "episode"] = Field(description="a turn's words, or an episode summary")
    node_id: UUID = Field(description="the reply of the turn the passage is from (an episode: its last node)")
    user_id: UUID = Field(description="the user's words of that turn (an episode: its first node)")
    turn: int = Field(description="the turn (an episode: the last it covers)")
    first_turn: int = Field(description="the first turn covered (a turn: itself)")
    depth: int
    text: str
    user_part: int = Field(description="how many leading characters of `text` are the user's words")
    hidden: bool = Field(description="the user hid the turn: out of the window, still recallable")
    score: float = Field(description="the fused score (reciprocal rank fusion)")
    found_by: dict[str, FoundBy] = Field(
        description="the retrievers that found it: bm25 (the passage), bm25_context (it after the end of the one"
        " before), dense"
    )


class RecallResponse(BaseModel):
    story_id: UUID
    query: str
    at: UUID | None
    hits: list[RecallHitModel]


class IndexResponse(BaseModel):
    story_id: UUID
    passages: int = Field(description="passages in the story's recall index")
    summary_passages: int = Field(description="of which from episode summaries")
    dense: bool = Field(description="the index has vectors (false: no embedder, or it failed: BM25 alone)")
    dense_passages: int = Field(
        0,
        description="passages with a vector made: a long backlog is embedded a share at a time, the oldest first,"
        " while every passage is searched by its words; the vectors join the ranking (`dense`) once all are made",
    )
    index_seq: int = Field(description="the archive position the index reflects")
    archive_seq: int = Field(description="the archive's position now")
    behind: bool
    embedder: str
    building: bool = Field(description="a newer index is being built")
