"""What the domain needs from outside, as Protocols; adapters live in providers/ and projections/."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

if TYPE_CHECKING:
    import numpy as np


class TokenCounter(Protocol):
    """Counts tokens of a text the way the target model would (or a close estimate)."""

    name: str

    def count(self, text: str) -> int: ...


class TreeIndex(Protocol):
    """Ancestry questions over a story's tree, answered by the `nodes` read model."""

    def is_ancestor(self, ancestor_id: UUID, node_id: UUID) -> bool:
        """True when `ancestor_id` is `node_id` or one of its ancestors."""
        ...

    def path_ids(self, node_id: UUID, min_depth: int) -> set[UUID]:
        """`node_id` and its ancestors down to depth `min_depth` (one walk up the path)."""
        ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call the model asked for; `arguments` is the raw JSON text it wrote (maybe malformed)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatResult:
    """What one model call produced."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None


class ModelCallError(Exception):
    """A model call failed for good (after retries); `outcome` is a short label for the cost ledger."""

    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.elapsed_ms = 0.0


class ChatModel(Protocol):
    """An OpenAI-compatible chat model. Text deltas go to `on_text` as they stream in, and each tool
    call's argument fragments to `on_call(index, name, fragment)`, which answers whether it passed
    anything on to the user (after which a broken call is not retried)."""

    model: str

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
        max_tokens: int | None = None,
        on_call: Callable[[int, str, str], bool] | None = None,
    ) -> ChatResult: ...

    async def close(self) -> None:
        """Release the client's connections."""
        ...


class Embedder(Protocol):
    """Text → L2-normalised vectors for recall: in this process (`providers/embedders.py`) or from an
    OpenAI-compatible `/embeddings` endpoint. `encode` blocks the calling thread (recall's own threads
    call it); `embed` is the same for the event loop."""

    model: str
    revision: str  # changes whenever the same model name would give other vectors
    instant: bool  # in this process and about as fast as a hash: vectors not worth saving, a query on the loop
    remote: bool  # over the network: never waited for on a search's own thread

    @property
    def dimensions(self) -> int: ...

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray: ...

    def query_seconds(self, text: str) -> float:
        """How long `encode([text], "query")` is expected to take here (0: no time worth waiting for)."""
        ...

    def background_thread(self) -> None:
        """Set the calling thread up for embeddings nobody waits for (the lowest priority; an engine's own
        needs): the initializer of recall's background threads."""
        ...

    async def embed(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray: ...

    async def close(self) -> None:
        """Release the client's connections."""
        ...
