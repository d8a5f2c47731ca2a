"""Request and response models; the OpenAPI document is generated from them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from domain.values import CardData, JobKind, NodeView, SceneAuthor

MAX_TEXT = 100_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SettingsOverrides(Strict):
    """Any subset of the story settings; omitted fields keep the card's (or the default) value."""

    keep_turns: int | None = Field(None, ge=1, le=1000)
    pack_turns: int | None = Field(None, ge=0, le=1000)
    episodes_kept: int | None = Field(None, ge=0, le=100)
    min_pack_chars: int | None = Field(None, ge=0, le=1_000_000)
    context_window: int | None = Field(None, ge=512, le=4_000_000)
    reply_reserve: int | None = Field(None, ge=0, le=1_000_000)
    recall_k: int | None = Field(None, ge=0, le=50)
    fill_window: bool | None = None
    recall_tokens: int | None = Field(None, ge=0, le=1_000_000)
    user_name: str | None = Field(None, min_length=1, max_length=100)
    language: Literal["auto", "zh", "en"] | None = Field(
        None, description="the language of changji's own prompt texts (auto: the card's, detected from its text)"
    )
    lore_bodies: Literal["auto", "titles", "full"] | None = None
    lore_tokens: int | None = Field(None, ge=0, le=1_000_000)
    lore_write_gate: bool | None = None
    recall_summaries: bool | None = None
    proxy_budget: Literal["auto", "client", "story"] | None = Field(
        None,
        description="what a proxied request's context may hold: no more than the front end sent (client), the"
        " story's window (story), or the service's choice (auto)",
    )

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


# --- cards ------------------------------------------------------------------------------------


class CreateCardRequest(Strict):
    card: CardData = Field(description="Character Card V2 `data` fields (unknown fields kept verbatim)")
    settings: SettingsOverrides = Field(default_factory=SettingsOverrides)


class UpdateCardRequest(Strict):
    card: dict[str, Any] | None = Field(None, description="card fields to replace; others are kept")
    settings: SettingsOverrides | None = None


class MergeCardRequest(Strict):
    into: UUID = Field(description="the card to merge this one into: its stories move there")


class FileRef(BaseModel):
    path: str | None = None
    sha256: str
    media_type: str
    size: int


class LorebookRef(BaseModel):
    id: UUID
    name: str


class CardResponse(BaseModel):
    id: UUID
    version: int
    name: str
    card: dict[str, Any]
    settings: dict[str, Any]
    language: Literal["zh", "en"] = Field(description="the language of changji's texts in this card's prompts")
    source: dict[str, Any] = Field(
        default_factory=dict, description="an imported card: the file it came from (container, spec, warnings)"
    )
    art: FileRef | None = Field(None, description="an imported card's image (exported back with the PNG)")
    assets: list[FileRef] = Field(default_factory=list, description="other files of an imported card (CHARX)")
    lorebooks: list[LorebookRef] = Field(default_factory=list, description="stand-alone lorebooks attached")
    created_at: datetime
    updated_at: datetime


class MergeCardResponse(BaseModel):
    card: CardResponse = Field(description="the card merged into, as it is now")
    stories_moved: int = Field(description="the stories this request moved (none when asked again)")


class CardSummary(BaseModel):
    id: UUID
    name: str
    tags: list[str]
    created_at: datetime
    updated_at: datetime


class CardListResponse(BaseModel):
    items: list[CardSummary]
    next_cursor: str | None


# --- stories ----------------------------------------------------------------------------------


class CreateStoryRequest(Strict):
    card_id: UUID
    greeting_index: int = Field(0, ge=0, description="0 = first_mes, n = alternate_greetings[n-1]")
    title: str = Field("", max_length=200)
    settings: SettingsOverrides = Field(default_factory=SettingsOverrides)


class UpdateStoryRequest(Strict):
    title: str | None = Field(None, min_length=1, max_length=200)
    settings: SettingsOverrides | None = None


class StoryResponse(BaseModel):
    id: UUID
    version: int
    card_id: UUID
    title: str
    root_id: UUID
    leaf_id: UUID
    settings: dict[str, Any] = Field(description="effective settings (card defaults + story overrides)")
    overrides: dict[str, Any]
    saves: int
    created_at: datetime
    updated_at: datetime


class StorySummary(BaseModel):
    id: UUID
    card_id: UUID
    card_name: str = Field(
        "", description="the card's name (a card the proxy made is named from what the front end sent)"
    )
    title: str
    leaf_id: UUID
    last_words: str = Field("", description="the first 200 characters of the leaf's text: which chat this is")
    nodes: int
    created_at: datetime
    updated_at: datetime


class StoryListResponse(BaseModel):
    items: list[StorySummary]
    next_cursor: str | None


# --- nodes ------------------------------------------------------------------------------------


class AppendNodeRequest(Strict):
    kind: Literal["user", "reply"]
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    parent_id: UUID | None = Field(None, description="defaults to the story's leaf")


class NodeResponse(BaseModel):
    id: UUID
    story_id: UUID
    parent_id: UUID | None
    kind: str
    depth: int
    turn: int
    text: str
    hidden: bool
    starred: bool
    revisions: int
    phase: str = Field(
        description="final (written whole), or an engine reply's writing/waiting/sealed/stopped/withdrawn"
    )
    draft_version: int
    version: int
    created_at: datetime

    @classmethod
    def of(cls, node: NodeView) -> NodeResponse:
        return cls.model_validate(node, from_attributes=True)


class AppendNodeResponse(BaseModel):
    node: NodeResponse
    story_version: int
    regenerated: bool = Field(description="true when the node is a new sibling of an existing reply")


class CheckoutRequest(Strict):
    node_id: UUID


class LeafResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    story_version: int


class ReviseRequest(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    reason: str = Field("", max_length=500)


class NodeIdsRequest(Strict):
    node_ids: list[UUID] = Field(min_length=1, max_length=1000)


class NodeIdsResponse(BaseModel):
    node_ids: list[UUID]


class TreeNode(BaseModel):
    id: UUID
    parent_id: UUID | None
    kind: str
    phase: str
    depth: int
    turn: int
    hidden: bool
    starred: bool
    revisions: int
    chars: int
    preview: str
    created_at: datetime


class TreeResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    nodes: list[TreeNode]
    next_cursor: str | None


class NodeListResponse(BaseModel):
    nodes: list[NodeResponse]


class PathResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    nodes: list[NodeResponse]
    truncated: bool = Field(description="true when `limit` left older nodes out")


# --- context ----------------------------------------------------------------------------------


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


# --- saves ------------------------------------------------------------------------------------


class CreateSaveRequest(Strict):
    name: str | None = Field(None, min_length=1, max_length=200)
    node_id: UUID | None = Field(None, description="defaults to the story's leaf")


class SaveResponse(BaseModel):
    id: str
    name: str
    node_id: UUID
    worldline_id: str
    worldline_name: str
    parent_save_id: str | None
    fork_from_save_id: str | None
    on_current_path: bool
    created_at: datetime


class WorldLineModel(BaseModel):
    id: str
    name: str
    saves: list[SaveResponse]


class SavesResponse(BaseModel):
    story_id: UUID
    current_save_id: str | None
    worldlines: list[WorldLineModel]


class RenameWorldLineRequest(Strict):
    name: str = Field(min_length=1, max_length=200)


# --- search and replay ------------------------------------------------------------------------


class SearchHitModel(BaseModel):
    node_id: UUID
    kind: str
    depth: int
    turn: int
    hidden: bool
    snippet: str


class SearchResponse(BaseModel):
    story_id: UUID
    query: str
    hits: list[SearchHitModel]


class EventModel(BaseModel):
    type: str
    originator_id: UUID
    version: int
    timestamp: datetime
    data: dict[str, Any]


class ReplayStep(BaseModel):
    node_id: UUID
    kind: str
    depth: int
    turn: int
    events: list[EventModel]
    context_messages: int
    context_tokens: int
    visible_nodes: int


class ReplayResponse(BaseModel):
    story_id: UUID
    at: UUID
    steps: list[ReplayStep]
    next_depth: int | None


# --- engine turns -----------------------------------------------------------------------------


class PostTurnRequest(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="the user's words")
    parent_id: UUID | None = Field(None, description="defaults to the story's leaf")


class RegenerateRequest(Strict):
    user_id: UUID | None = Field(None, description="the user node to answer again; defaults to the leaf's")


class AnswerRequest(Strict):
    answer: str = Field(min_length=1, max_length=2000, description="one of the options, or the user's own words")


class AskModel(BaseModel):
    ask_id: str
    question: str
    options: list[str]


class ToolActivity(BaseModel):
    name: str
    ok: bool
    result: str


class TurnResponse(BaseModel):
    """A turn's outcome (the JSON form; `Accept: text/event-stream` streams the same as events)."""

    story_id: UUID
    reply: NodeResponse
    outcome: Literal["sealed", "asked", "revised", "stopped", "error"]
    ask: AskModel | None = None
    tools: list[ToolActivity]
    error: dict[str, Any] | None = None


class StopResponse(BaseModel):
    reply: NodeResponse
    was_running: bool


class DraftVersionModel(BaseModel):
    version: int
    operation: str
    text: str
    direct: bool
    at: datetime


class DraftResponse(BaseModel):
    node_id: UUID
    phase: str
    version: int
    text: str
    sealed_version: int | None
    versions: list[DraftVersionModel]
    asks: list[dict[str, Any]]
    refusals: list[dict[str, str]]
    stopped: dict[str, str] | None
    revisions: list[dict[str, Any]]


class CostLine(BaseModel):
    purpose: str
    model: str
    calls: int
    ok: int
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


class CostsResponse(BaseModel):
    lines: list[CostLine]
    calls: int
    prompt_tokens: int
    completion_tokens: int


# --- scene and jobs ---------------------------------------------------------------------------


class ScenePatchModel(BaseModel):
    seq: int
    author: SceneAuthor
    patch: dict[str, Any]
    warnings: list[str]
    at: datetime


class SceneText(BaseModel):
    state: str = Field(description="the body of the 【世界状态】 block")
    roster: str = Field(description="the body of the 【登场名录】 block")


class SceneResponse(BaseModel):
    story_id: UUID
    at: UUID = Field(description="the node the scene is for")
    source_node_id: UUID | None = Field(description="the nearest patched node on the path (None: nothing yet)")
    state: dict[str, Any] = Field(description="time, location, characters, inventory, flags, plot_threads")
    roster: dict[str, dict[str, str]] = Field(description="characters, places, items, events → first in-story time")
    present: list[str] = Field(description="characters whose `at` is the scene's location")
    text: SceneText
    patches: list[ScenePatchModel] = Field(description="the patches recorded on this node itself, oldest first")


class EditSceneRequest(Strict):
    patch: dict[str, Any] = Field(
        description="fields of the scene (time, location, characters, inventory, flags, plot_threads) and/or "
        "`roster` ({table: {name: time | null}}), merged by the scribe's rules"
    )
    at: UUID | None = Field(None, description="the node to patch (default: the leaf)")


class EditSceneResponse(SceneResponse):
    applied: list[str]
    warnings: list[str] = Field(description="parts of the patch the merge rules refused")


JobStatus = Literal["pending", "running", "retrying", "done", "skipped", "failed"]
"""A job's state as recorded, or `running` while this process runs it."""


class JobModel(BaseModel):
    id: str = Field(description="`<kind>:<node id>`: stable, one per kind and node")
    kind: JobKind
    node_id: UUID
    story_id: UUID
    status: JobStatus = Field(description="pending, retrying, done, skipped, failed as recorded; running while it runs")
    attempts: int = Field(description="failed attempts so far")
    detail: str = Field(description="the skip reason or the last error")
    next_at: datetime | None = Field(description="when it runs (next), if it is still due")
    created_at: datetime
    updated_at: datetime
    seq: int


class JobListResponse(BaseModel):
    items: list[JobModel]
    next_cursor: str | None


class StoryJobsResponse(BaseModel):
    story_id: UUID
    counts: dict[JobStatus, int] = Field(description="the story's jobs by status (running counted apart from pending)")
    settled: bool = Field(
        description="no job of the story is pending, retrying or running: its background work is done"
    )


# --- summaries ---------------------------------------------------------------------------------


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


# --- errors -----------------------------------------------------------------------------------


# --- recall -----------------------------------------------------------------------------------


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
    index_seq: int = Field(description="the archive position the index reflects")
    archive_seq: int = Field(description="the archive's position now")
    behind: bool
    embedder: str
    building: bool = Field(description="a newer index is being built")


class FieldError(BaseModel):
    field: str
    pointer: str
    message: str
    type: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] = Field(default_factory=list)


# --- lorebooks --------------------------------------------------------------------------------


class LoreEntryModel(BaseModel):
    uid: int
    keys: list[str]
    secondary_keys: list[str]
    title: str
    content: str
    constant: bool
    enabled: bool
    selective: bool
    logic: str
    order: int
    position: str
    case_sensitive: bool | None
    whole_words: bool | None
    use_regex: bool
    scan_depth: int | None
    extensions: dict[str, Any]
    pending: bool = Field(False, description="held by the write gate until the user approves it")
    written_at: dict[str, UUID] | None = Field(None, description="the model's entries: the story and node")


class LorebookResponse(BaseModel):
    id: str = Field(description="the lorebook's id; `embedded` for the card's own character_book")
    card_id: UUID
    version: int
    name: str
    kind: Literal["embedded", "world_info", "supplement"]
    format: str
    scan: dict[str, Any]
    extras: dict[str, Any]
    entries: list[LoreEntryModel]


class LorebookSummary(BaseModel):
    id: str
    name: str
    kind: Literal["embedded", "world_info", "supplement"]
    entries: int


class LorebookListResponse(BaseModel):
    items: list[LorebookSummary]


class LoreEntryRequest(Strict):
    """An entry's fields (changji's form); `uid` is given the next free number when left out."""

    uid: int | None = Field(None, ge=0, le=2**53)
    keys: list[str] = Field(default_factory=list, max_length=200)
    secondary_keys: list[str] = Field(default_factory=list, max_length=200)
    title: str = Field("", max_length=500)
    content: str = Field("", max_length=100_000)
    constant: bool = False
    enabled: bool = True
    selective: bool = True
    logic: Literal["and_any", "not_all", "not_any", "and_all"] = "and_any"
    order: int = 100
    position: Literal["before_char", "after_char"] = "before_char"
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    use_regex: bool = False
    scan_depth: int | None = Field(None, ge=0, le=1000)
    extensions: dict[str, Any] = Field(default_factory=dict)


class LoreEntryChanges(Strict):
    """The fields to change; the others are kept. `enabled` switches the entry off or on."""

    keys: list[str] | None = Field(None, max_length=200)
    secondary_keys: list[str] | None = Field(None, max_length=200)
    title: str | None = Field(None, max_length=500)
    content: str | None = Field(None, max_length=100_000)
    constant: bool | None = None
    enabled: bool | None = None
    selective: bool | None = None
    logic: Literal["and_any", "not_all", "not_any", "and_all"] | None = None
    order: int | None = None
    position: Literal["before_char", "after_char"] | None = None
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    use_regex: bool | None = None
    scan_depth: int | None = Field(None, ge=0, le=1000)
    extensions: dict[str, Any] | None = None


class LoreSearchHit(BaseModel):
    book_id: str
    score: int
    entry: LoreEntryModel


class LoreSearchResponse(BaseModel):
    query: str
    items: list[LoreSearchHit]


class ImportChatResponse(BaseModel):
    story: StoryResponse
    steps: int = Field(description="nodes on the imported path (greeting left out)")
    nodes: int = Field(description="nodes made, siblings (swipes) included")
    warnings: list[str] = Field(description="the first 100")
    skipped_lines: list[int] = Field(
        description="lines that were not JSON objects (SillyTavern skips them too): the first 100"
    )
    warning_count: int
    skipped_count: int
