"""The one place URLs are listed, with the models the OpenAPI document is generated from."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import BaseModel

from api import schemas as s
from api.handlers import (
    cards,
    chats,
    drift,
    explore,
    jobs,
    lore,
    memory,
    nodes,
    proxy,
    recall,
    saves,
    scene,
    stories,
    summaries,
    turns,
)
from api.schemas import proxy as p

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    query: tuple[str, ...] = ()
    if_match: bool = False
    idempotent: bool = False
    body_optional: bool = False  # the request body may be left out (read as {}): every field has a default
    ranges: tuple[tuple[str, int, int], ...] = ()  # query parameters' bounds: integers' values, q's length
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()  # query parameters that take one of a few words
    required: tuple[str, ...] = ()  # query parameters that must be given (`q` always is)
    uploads: tuple[str, ...] = ()  # the body is a file of these media types (raw, or a multipart/form-data file)
    downloads: tuple[str, ...] = ()  # the answer is a file of one of these media types
    streams: bool = False  # `Accept: text/event-stream` answers server-sent events (200) instead of JSON
    openai: bool = False  # an OpenAI-compatible route: errors in OpenAI's shape, not problem+json


CARD_FILES = ("application/json", "image/png", "application/zip")  # card JSON (any spec), a PNG card, CHARX

ROUTES = (
    Route("POST", "/v1/chat/completions", proxy.chat_completions, "OpenAI-compatible chat completions: changji keeps the story and sends the upstream its memory instead of the history (errors in OpenAI's shape)", p.ChatCompletionRequest, p.ChatCompletion, streams=True, openai=True),
    Route("GET", "/v1/models", proxy.models, "The upstream's models (OpenAI-compatible)", None, p.ModelList, openai=True),
    Route("POST", "/v1/cards", cards.create_card, "Create a card", s.CreateCardRequest, s.CardResponse, 201, idempotent=True),
    Route("GET", "/v1/cards", cards.list_cards, "List cards", None, s.CardListResponse, query=("limit", "cursor"), ranges=(("limit", 1, 500), ("cursor", 0, 2**62))),
    Route("POST", "/v1/cards/import", cards.import_card, "Import a card file (PNG, JSON in any spec version, CHARX) as the body or a multipart file", None, s.CardResponse, 201, idempotent=True, uploads=CARD_FILES),
    Route("GET", "/v1/cards/{card_id}", cards.get_card, "Get a card", None, s.CardResponse),
    Route("GET", "/v1/cards/{card_id}/export", cards.export_card, "The card as a file: V2 or V3 JSON, PNG, or CHARX (with the files an imported CHARX came with)", query=("format",), choices=(("format", ("v2", "v3", "png", "charx")),), downloads=("application/json", "image/png", "application/zip")),
    Route("POST", "/v1/cards/{card_id}/lorebooks", lore.attach_lorebook, "Attach a World Info file (the body or a multipart file) to the card", None, s.LorebookResponse, 201, query=("name",), idempotent=True, uploads=("application/json",)),
    Route("GET", "/v1/cards/{card_id}/lorebooks", lore.list_lorebooks, "The card's lorebooks: its embedded one, then those attached", None, s.LorebookListResponse),
    Route("GET", "/v1/cards/{card_id}/lorebooks/{lorebook_id}", lore.get_lorebook, "A lorebook with its entries (`embedded`: the card's own)", None, s.LorebookResponse),
    Route("DELETE", "/v1/cards/{card_id}/lorebooks/{lorebook_id}", lore.detach_lorebook, "Detach a lorebook from the card", status=204),
    Route("GET", "/v1/cards/{card_id}/lorebooks/{lorebook_id}/entries", lore.list_entries, "A lorebook's entries, each with its uid and fields, a page at a time by uid", None, s.LoreEntryListResponse, query=("limit", "cursor"), ranges=(("limit", 1, 1000), ("cursor", -1, 2**53))),
    Route("POST", "/v1/cards/{card_id}/lorebooks/{lorebook_id}/entries", lore.add_entry, "Add an entry", s.LoreEntryRequest, s.LoreEntryModel, 201),
    Route("PATCH", "/v1/cards/{card_id}/lorebooks/{lorebook_id}/entries/{uid}", lore.change_entry, "Change an entry's fields, or switch it off or on (enabled)", s.LoreEntryChanges, s.LoreEntryModel),
    Route("POST", "/v1/cards/{card_id}/lorebooks/{lorebook_id}/entries/{uid}/approve", lore.approve_entry, "Approve an entry the write gate holds", None, s.LoreEntryModel),
    Route("DELETE", "/v1/cards/{card_id}/lorebooks/{lorebook_id}/entries/{uid}", lore.remove_entry, "Remove an entry", status=204),
    Route("GET", "/v1/cards/{card_id}/lore/search", lore.search_lore, "Search the card's lore as the model's lorebook_search does", None, s.LoreSearchResponse, query=("q", "limit"), ranges=(("q", 1, 500), ("limit", 1, 100))),
    Route("PATCH", "/v1/cards/{card_id}", cards.update_card, "Update a card", s.UpdateCardRequest, s.CardResponse, if_match=True),
    Route("DELETE", "/v1/cards/{card_id}", cards.delete_card, "Delete a card", status=204),
    Route("POST", "/v1/cards/{card_id}/merge", cards.merge_card, "Merge the card into another (a card the proxy made into an imported one): its stories and lorebooks move there, and chats that would make it go there", s.MergeCardRequest, s.MergeCardResponse),
    Route("POST", "/v1/stories", stories.create_story, "Start a story from a card", s.CreateStoryRequest, s.StoryResponse, 201, idempotent=True),
    Route("GET", "/v1/stories", stories.list_stories, "List stories (deleted=true: the deleted ones, to restore)", None, s.StoryListResponse, query=("limit", "cursor", "card_id", "deleted"), ranges=(("limit", 1, 500), ("cursor", 0, 2**62))),
    Route("POST", "/v1/stories/import", chats.import_chat, "Import a SillyTavern chat (.jsonl, the body or a multipart file) into a new story of a card", None, s.ImportChatResponse, 201, query=("card_id", "title"), idempotent=True, required=("card_id",), uploads=("application/jsonl",)),
    Route("GET", "/v1/stories/{story_id}", stories.get_story, "Get a story", None, s.StoryResponse),
    Route("GET", "/v1/stories/{story_id}/export", chats.export_chat, "The story's path as a SillyTavern chat (.jsonl); scope=tree gives every reply's siblings as its swipes", query=("format", "scope", "at"), choices=(("format", ("sillytavern",)), ("scope", ("tree", "path"))), downloads=("application/jsonl",)),
    Route("PATCH", "/v1/stories/{story_id}", stories.update_story, "Retitle or reconfigure a story", s.UpdateStoryRequest, s.StoryResponse),
    Route("DELETE", "/v1/stories/{story_id}", stories.delete_story, "Delete a story (its events stay: it can be restored)", status=204, if_match=True),
    Route("POST", "/v1/stories/{story_id}/restore", stories.restore_story, "Bring a deleted story back as it was", None, s.StoryResponse, if_match=True),
    Route("POST", "/v1/stories/{story_id}/nodes", nodes.append_node, "Append a user or reply node (a reply under an answered user node is a regenerate)", s.AppendNodeRequest, s.AppendNodeResponse, 201, if_match=True, idempotent=True),
    Route("POST", "/v1/stories/{story_id}/checkout", stories.checkout, "Move the leaf to any node", s.CheckoutRequest, s.LeafResponse, if_match=True),
    Route("GET", "/v1/stories/{story_id}/tree", stories.tree, "The story's nodes (the tree), oldest first", None, s.TreeResponse, query=("limit", "cursor"), ranges=(("limit", 1, 5000), ("cursor", 0, 2**62))),
    Route("GET", "/v1/stories/{story_id}/path", stories.path, "The path root→leaf (or →at)", None, s.PathResponse, query=("at", "limit"), ranges=(("limit", 1, 10_000),)),
    Route("GET", "/v1/stories/{story_id}/context", stories.context, "The context for the next turn, with its explain list", None, s.ContextResponse, query=("at",)),
    Route("GET", "/v1/stories/{story_id}/search", explore.search, "Full-text search over the story's nodes", None, s.SearchResponse, query=("q", "limit"), ranges=(("q", 1, 200), ("limit", 1, 200))),
    Route("GET", "/v1/stories/{story_id}/replay", explore.replay, "Replay a path: its events and the projections after each step", None, s.ReplayResponse, query=("at", "from_depth", "limit"), ranges=(("from_depth", 0, 2**31), ("limit", 1, 100))),
    Route("POST", "/v1/stories/{story_id}/hide", nodes.hide_many, "Hide several nodes", s.NodeIdsRequest, s.NodeIdsResponse),
    Route("POST", "/v1/stories/{story_id}/unhide", nodes.unhide_many, "Unhide several nodes", s.NodeIdsRequest, s.NodeIdsResponse),
    Route("GET", "/v1/stories/{story_id}/saves", saves.list_saves, "Save points grouped by world line", None, s.SavesResponse),
    Route("POST", "/v1/stories/{story_id}/saves", saves.create_save, "Save at the leaf (or a node)", s.CreateSaveRequest, s.SaveResponse, 201, idempotent=True, body_optional=True),
    Route("POST", "/v1/stories/{story_id}/saves/{save_id}/restore", saves.restore_save, "Move the leaf back to a save", None, s.SavesResponse),
    Route("DELETE", "/v1/stories/{story_id}/saves/{save_id}", saves.delete_save, "Delete a save point", status=204),
    Route("PATCH", "/v1/stories/{story_id}/worldlines/{worldline_id}", saves.rename_worldline, "Rename a world line", s.RenameWorldLineRequest, s.SavesResponse),
    Route("GET", "/v1/nodes/{node_id}", nodes.get_node, "Get a node", None, s.NodeResponse),
    Route("GET", "/v1/nodes/{node_id}/children", nodes.children, "A node's children", None, s.NodeListResponse),
    Route("GET", "/v1/nodes/{node_id}/siblings", nodes.siblings, "A node and its siblings (swipes)", None, s.NodeListResponse),
    Route("POST", "/v1/nodes/{node_id}/star", nodes.star, "Make the node an anchor", None, s.NodeResponse),
    Route("POST", "/v1/nodes/{node_id}/unstar", nodes.unstar, "Remove the anchor", None, s.NodeResponse),
    Route("POST", "/v1/nodes/{node_id}/hide", nodes.hide, "Leave the node out of contexts", None, s.NodeResponse),
    Route("POST", "/v1/nodes/{node_id}/unhide", nodes.unhide, "Bring the node back", None, s.NodeResponse),
    Route("POST", "/v1/nodes/{node_id}/revise", nodes.revise, "Revise a reply's text in place", s.ReviseRequest, s.NodeResponse),
    Route("POST", "/v1/stories/{story_id}/turns", turns.post_turn, "Engine mode: the user's words in, the main model's reply out (JSON, or SSE with Accept: text/event-stream)", s.PostTurnRequest, s.TurnResponse, 201, if_match=True, streams=True),
    Route("POST", "/v1/stories/{story_id}/regenerate", turns.regenerate, "Engine mode: a new reply beside the others under a user node", s.RegenerateRequest, s.TurnResponse, 201, body_optional=True, streams=True),
    Route("POST", "/v1/nodes/{node_id}/answer", turns.answer, "Answer a turn's decision card; the turn resumes", s.AnswerRequest, s.TurnResponse, 201, streams=True),
    Route("POST", "/v1/nodes/{node_id}/stop", turns.stop, "Stop a turn; what was written stays as an unsealed draft", None, s.StopResponse),
    Route("GET", "/v1/nodes/{node_id}/draft", turns.draft, "A reply's draft with every version it went through", None, s.DraftResponse),
    Route("GET", "/v1/stories/{story_id}/costs", turns.story_costs, "Model calls of a story, summed per purpose and model", None, s.CostsResponse),
    Route("GET", "/v1/cards/{card_id}/memory", memory.get_memory, "The card's memory across its stories: the handbook (each item with the stories behind it), the resident summary, the recaps", None, s.CardMemoryResponse),
    Route("POST", "/v1/cards/{card_id}/memory/sync", memory.sync_memory, "Bring the card's memory up to date with its stories now (recaps, forgetting, the merge), by the side model when there is one, else by the offline rules", None, s.SyncMemoryResponse),
    Route("GET", "/v1/cards/{card_id}/memory/history", memory.memory_history, "The card memory's history, event by event: each recap, merge, edit and forgetting as it was recorded", None, s.MemoryHistoryResponse),
    Route("GET", "/v1/cards/{card_id}/memory/items/{item_id}", memory.audit_item, "A handbook item and the recaps behind it, each with the span of its story's path it read", None, s.MemoryItemAuditResponse),
    Route("POST", "/v1/cards/{card_id}/memory/forget", memory.forget_story, "Forget a story's memory at the user's word (it stays forgotten if the story is restored), then merge", s.ForgetStoryRequest, s.CardMemoryResponse),
    Route("PUT", "/v1/cards/{card_id}/memory/resident", memory.edit_resident, "Rewrite the resident summary (kept as written by later merges)", s.MemoryTextRequest, s.CardMemoryResponse, if_match=True),
    Route("PUT", "/v1/cards/{card_id}/memory/handbook", memory.edit_handbook, "Rewrite the handbook as text, its items tagged with their stories (what the user adds is kept by later merges)", s.MemoryTextRequest, s.CardMemoryResponse, if_match=True),
    Route("PUT", "/v1/cards/{card_id}/memory/recaps/{story_id}", memory.edit_recap, "Rewrite a story's recap (never rewritten by a later automatic one)", s.RecapTextRequest, s.CardMemoryResponse, if_match=True),
    Route("GET", "/v1/cards/{card_id}/costs", turns.card_costs, "Model calls of all stories of a card", None, s.CostsResponse),
    Route("GET", "/v1/stories/{story_id}/drift", drift.get_drift, "The drift signals at the leaf's reply or at a node's, and whether the next turn re-anchors the character", None, s.DriftResponse, query=("at",)),
    Route("GET", "/v1/stories/{story_id}/scene", scene.get_scene, "The scene (world state, roster, presence) at the leaf or at a node", None, s.SceneResponse, query=("at",)),
    Route("PATCH", "/v1/stories/{story_id}/scene", scene.edit_scene, "Patch the scene or the roster at the leaf or at a node (the scribe's merge rules; warnings returned)", s.EditSceneRequest, s.EditSceneResponse),
    Route("GET", "/v1/stories/{story_id}/summaries", summaries.get_summaries, "The summary layers (digest, episodes) of the path to the leaf or a node", None, s.SummariesResponse, query=("at",)),
    Route("POST", "/v1/stories/{story_id}/compact", summaries.compact, "Compact now: pack everything but the last keep_turns turns, then fold", s.CompactRequest, s.CompactResponse, body_optional=True),
    Route("PATCH", "/v1/nodes/{node_id}/summary", summaries.edit_summary, "Rewrite the episode or digest this node carries (later folds use the edit)", s.EditSummaryRequest, s.SummariesResponse),
    Route("GET", "/v1/stories/{story_id}/recall", recall.recall, "Recall: the archived passages of the path to the leaf (or a node) that match a query, with their scores", None, s.RecallResponse, query=("q", "k", "at"), ranges=(("q", 1, 500), ("k", 1, 50))),
    Route("GET", "/v1/stories/{story_id}/index", recall.index, "The story's recall index: passages indexed, how far behind, the embedder", None, s.IndexResponse),
    Route("GET", "/v1/jobs", jobs.list_jobs, "Background jobs and their outcomes (status: one or more, comma-separated or repeated)", None, s.JobListResponse, query=("story_id", "kind", "status", "limit", "cursor"), ranges=(("limit", 1, 500), ("cursor", 0, 2**62))),
    Route("POST", "/v1/jobs/{job_id}/retry", jobs.retry_job, "Do a failed or skipped job again (due now, its attempts counted afresh; 422 while it is due or once done)", None, s.JobModel, 202),
    Route("GET", "/v1/stories/{story_id}/jobs", jobs.story_jobs, "The story's background work at a glance: jobs by status, and whether all of it is settled", None, s.StoryJobsResponse),
)  # fmt: skip


def router_path(path: str) -> str:
    """`path` as the router matches it: an id never takes a word another route has in its place, so
    `/v1/cards/import` is that route alone (PATCH there is 405, not the update of a card named `import`)."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        name = re.fullmatch(r"{(\w+)}", part)
        words = {
            other[i]
            for other in (route.path.split("/") for route in ROUTES)
            if len(other) > i and other[:i] == parts[:i] and not other[i].startswith("{")
        }
        if name and words:
            taken = "|".join(sorted(map(re.escape, words)))
            parts[i] = f"{{{name[1]}:(?!(?:{taken})(?:/|$))[^/]+}}"
    return "/".join(parts)


def add_routes(app: web.Application) -> None:
    for route in ROUTES:
        app.router.add_route(route.method, router_path(route.path), route.handler)
