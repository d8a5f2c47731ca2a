"""What every resource's models share: strict request models, the settings overrides, problem details."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from domain.values import regular_expressions

MAX_TEXT = 100_000


class Strict(BaseModel):
    """A request model: unknown fields are refused, and no value is coerced (`0` is not `false`, `"1"` not
    `1`), so the schema generated from it is the validation."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """A number with no fraction (`2.0`) in an integer field as the integer it is: JSON Schema's
        `integer` takes it, and strict validation would not."""
        if not isinstance(data, dict):
            return data
        integral = {
            name: int(value)
            for name, value in data.items()
            if type(value) is float and value.is_integer() and name in cls.model_fields
            and int in (cls.model_fields[name].annotation, *get_args(cls.model_fields[name].annotation))
        }  # fmt: skip
        return {**data, **integral} if integral else data


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
    recall_share: float | None = Field(
        None, ge=0, le=0.5, description="the prompt's share the recall block may take, up to 4,096 tokens"
    )
    user_name: str | None = Field(None, min_length=1, max_length=100)
    language: Literal["auto", "zh", "en"] | None = Field(
        None, description="the language of changji's own prompt texts (auto: the card's, detected from its text)"
    )
    lore_bodies: Literal["auto", "titles", "full"] | None = None
    lore_budget: int | None = Field(None, ge=1, le=100)
    lore_tokens: int | None = Field(None, ge=0, le=1_000_000)
    lore_min_activations: int | None = Field(None, ge=0, le=100)
    lore_min_depth: int | None = Field(None, ge=0, le=1000)
    lore_write_gate: bool | None = None
    recall_summaries: bool | None = None
    recall_rewrite: bool | None = None
    proxy_budget: Literal["auto", "client", "story"] | None = Field(
        None,
        description="what a proxied request's context may hold: no more than the front end sent (client), the"
        " story's window (story), or the service's choice (auto)",
    )
    card_memory: bool | None = Field(
        None, description="recap this story into its card's memory, and carry the card's resident summary"
    )
    recap_turns: int | None = Field(None, ge=1, le=100_000)
    recap_quiet_minutes: float | None = Field(None, ge=0, le=100_000)
    identity_anchor: str | None = Field(
        None, max_length=4000, description="who the character is and its iron rules (empty: derived from the card)"
    )
    reanchor_turns: int | None = Field(None, ge=0, le=10_000)
    banned_patterns: (
        list[Annotated[str, Field(min_length=1, max_length=500, json_schema_extra={"format": "regex"})]] | None
    ) = Field(
        None, max_length=50, description="regular expressions (as Python's `regex` module reads them, in any case) no"
        " reply should match: a match of some words is a drift signal",
    )  # fmt: skip
    drift_creep: float | None = Field(None, ge=0, le=100)
    drift_repeat: int | None = Field(None, ge=0, le=1000)
    drift_language: float | None = Field(None, ge=0, le=1)
    drift_echo: float | None = Field(None, ge=0, le=1)

    @field_validator("banned_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str] | None) -> list[str] | None:
        return None if patterns is None else list(regular_expressions(patterns))

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


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
