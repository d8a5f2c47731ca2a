"""The OpenAI-compatible routes: what a front end sends (checked only as far as changji reads it: every
other field goes to the upstream untouched), what the upstream answers (relayed as it came), and errors in
OpenAI's shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ChatCompletionRequest(BaseModel):
    """A chat-completions request as a front end sends it. changji reads the messages (objects; their
    `role` and `content` place the chat in a story) and `stream`; every other field is the upstream's."""

    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="the chat as the front end has it: objects with `role` (system, developer, user, assistant,"
        " tool) and `content` (text, or a list of parts); others are passed on as they came",
    )
    stream: bool = Field(False, description="true: the answer streams as server-sent events")
    model: Any = Field(None, description="passed to the upstream as it is (default: the configured main model)")
    user: Any = Field(None, description="a story id of the tenant picks that story (as X-Changji-Story does)")


class ChatCompletion(BaseModel):
    """The upstream's answer, relayed as it came (OpenAI's `chat.completion` object)."""

    model_config = ConfigDict(extra="allow")

    id: Any = None
    object: Any = None
    choices: Any = None
    usage: Any = None


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str


class ModelList(BaseModel):
    """The upstream's models as it lists them (one that lists none: the configured model)."""

    model_config = ConfigDict(extra="allow")

    object: Any = None
    data: list[ModelEntry]


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """An error as OpenAI's API answers it; the OpenAI-compatible routes answer every error so."""

    error: OpenAIErrorDetail
