"""SillyTavern 1.12.6's settings of a fresh install, the source set to Custom (OpenAI-compatible), and its prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Defaults (`default/content/settings.json`, copied into a fresh install's settings; `public/scripts/openai.js`
# `default_settings` where settings.json is silent):
#   * context 4095 (`openai_max_context`), response 300 (`openai_max_tokens`), temperature 1, top_p 1,
#     frequency/presence penalty 0, streaming on (`stream_openai: true` in settings.json; the code default is off).
#   * Main prompt "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}." (settings.json;
#     the code's own default says {{charIfNotGroup}}, the same text outside group chats). Auxiliary ("nsfw") and
#     Post-History Instructions ("jailbreak") prompts are empty, so they send nothing.
#   * "[Start a new Chat]", "[Example Chat]", the continue nudge "[Continue the following message. Do not include
#     ANY parts of the original message. Use capitalization and punctuation as if your reply is a part of the
#     original message: {{lastChatMessage}}]", the impersonation prompt of settings.json (it has "Write 1 reply
#     only in internet RP style."; the code default lacks that sentence), personality format
#     "[{{char}}'s personality: {{personality}}]", scenario format "[Circumstances and context of the dialogue:
#     {{scenario}}]", World Info format "{0}".
#   * names_behavior 0 ("default": no `name` field on chat messages, no "Name: " prefix outside groups),
#     wrap_in_quotes off, send_if_empty "", squash_system_messages off, continue_prefill off, continue_postfix " ",
#     seed -1 (not sent), no stop strings (not sent), no logit-bias preset (an empty `logit_bias: {}` is sent).

NamesBehavior = Literal["none", "default", "completion", "content"]

MAIN_PROMPT = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
NEW_CHAT_PROMPT = "[Start a new Chat]"
NEW_EXAMPLE_CHAT_PROMPT = "[Example Chat]"
CONTINUE_NUDGE_PROMPT = (
    "[Continue the following message. Do not include ANY parts of the original message. Use capitalization and "
    "punctuation as if your reply is a part of the original message: {{lastChatMessage}}]"
)
IMPERSONATION_PROMPT = (
    "[Write your next reply from the point of view of {{user}}, using the chat history so far as a guideline for "
    "the writing style of {{user}}. Write 1 reply only in internet RP style. Don't write as {{char}} or system. "
    "Don't describe actions of {{char}}.]"
)
PERSONALITY_FORMAT = "[{{char}}'s personality: {{personality}}]"
SCENARIO_FORMAT = "[Circumstances and context of the dialogue: {{scenario}}]"


@dataclass(frozen=True)
class Settings:
    """SillyTavern 1.12.6's defaults for a fresh install, the source set to Custom (OpenAI-compatible)."""

    max_context: int = 4095
    max_tokens: int = 300
    model: str = "deepseek-chat"
    temperature: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    top_p: float = 1.0
    stream: bool = True
    seed: int = -1
    stop: tuple[str, ...] = ()
    main_prompt: str = MAIN_PROMPT
    nsfw_prompt: str = ""
    jailbreak_prompt: str = ""
    new_chat_prompt: str = NEW_CHAT_PROMPT
    new_example_chat_prompt: str = NEW_EXAMPLE_CHAT_PROMPT
    continue_nudge_prompt: str = CONTINUE_NUDGE_PROMPT
    impersonation_prompt: str = IMPERSONATION_PROMPT
    personality_format: str = PERSONALITY_FORMAT
    scenario_format: str = SCENARIO_FORMAT
    wi_format: str = "{0}"
    names_behavior: NamesBehavior = "default"
    wrap_in_quotes: bool = False
    send_if_empty: str = ""
    squash_system_messages: bool = False
    continue_postfix: str = " "
    prefer_character_prompt: bool = True
    prefer_character_jailbreak: bool = True
    pin_examples: bool = False
