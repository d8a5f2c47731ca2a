"""The body SillyTavern sends for a chat: the card's prompts in order, the chat cut to the budget, the fields."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tests.sillytavern.card import Card
from tests.sillytavern.macros import card_field, example_dialogues, substitute
from tests.sillytavern.settings import Settings
from tests.sillytavern.tokens import TokenCounter, counter_for_model, message_tokens

# Prompt order (`public/scripts/PromptManager.js` `promptManagerDefaultPromptOrder`, the "global" order a fresh
# install uses): main, worldInfoBefore, personaDescription, charDescription, charPersonality, scenario,
# enhanceDefinitions (disabled), nsfw, worldInfoAfter, dialogueExamples, chatHistory, jailbreak. An empty prompt
# sends no message. A card's `system_prompt` replaces main and its `post_history_instructions` replace jailbreak
# (`preparePromptsForChatCompletion` in openai.js; "prefer character prompt/jailbreak" are on by default).
#
# Budget and the cut (`populateChatCompletion`, `populateChatHistory`, `populateDialogueExamples`, class
# `ChatCompletion` in openai.js):
#   * budget = max_context - max_tokens, minus 3 ("every reply is primed"), minus each prompt before the chat,
#     minus the control prompts (impersonation) which go last, minus the "[Start a new Chat]" marker and, for a
#     continue, the nudge (both reserved first, placed afterwards).
#   * Then the chat, newest to oldest: a message is kept while budget - its tokens >= 0; the first one that does
#     not fit stops the walk (nothing older is tried). "[Start a new Chat]" is always put at the top of what was
#     kept, so it survives the cut; the greeting is an ordinary assistant message and is cut like any other.
#   * Example dialogues (mes_example) are filled after the chat (unless "pin examples"), each block opened by
#     "[Example Chat]", as `system` messages named `example_user` / `example_assistant`; they are placed before
#     the chat.
#
# Generation types (`Generate` in public/script.js, `populateChatHistory`/`populateChatCompletion` in openai.js):
#   * swipe: the swiped reply is dropped from the chat before the prompt is built, so the body equals the one
#     that produced the reply (recorded: byte-identical).
#   * regenerate: SillyTavern deletes the last reply from the chat, then builds the same body.
#   * continue: the chat still ends with the reply; the nudge (with that reply, trimmed) is the last message of
#     the chat history, a `system` message.
#   * impersonate: the impersonation prompt is a `system` message after everything else.
#
# What this builder does not model: World Info activation (pass the text SillyTavern's world-info.js produced
# as `world_info_before`/`world_info_after`), Author's Note and other extension prompts, group chats, quiet
# prompts, images, instruct mode.

Generation = Literal["normal", "regenerate", "swipe", "continue", "impersonate"]
REPLY_PRIMING_TOKENS = 3


@dataclass
class _Msg:
    role: str
    content: str
    tokens: int
    identifier: str
    name: str | None = None


@dataclass
class Plan:
    """The body and how it was fitted: which chat messages were kept, what budget was left."""

    body: dict[str, Any]
    kept: int  # chat messages (of those SillyTavern considered) that made it into the body
    considered: int  # chat messages SillyTavern considered (after a swipe/regenerate dropped the last reply)
    budget_left: int
    messages: list[_Msg] = field(default_factory=list)


def _sanitize_name(name: str) -> str:
    """OpenAI's `name` accepts [A-Za-z0-9_-]{1,64}; PromptManager.sanitizeName replaces the rest with '_'."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) else name


def _number(value: float) -> float | int:
    """JSON.stringify writes 1.0 as 1."""
    return int(value) if float(value).is_integer() else value


def plan_body(
    card: Card,
    chat: Sequence[Mapping[str, Any]],
    *,
    user: str = "User",
    generation: Generation = "normal",
    settings: Settings | None = None,
    world_info_before: str = "",
    world_info_after: str = "",
    persona_description: str = "",
    counter: TokenCounter | None = None,
) -> Plan:
    """The body SillyTavern would send for `chat` (its whole history, greeting first, as role/content dicts;
    for "normal" ending with the user's new words, for "swipe" with the reply being swiped)."""
    s = settings or Settings()
    count = counter or counter_for_model(s.model)
    char = card.name

    def sub(text: str, **extra: str) -> str:
        return substitute(text, user=user, char=char, extra=extra)

    def msg(role: str, content: str, identifier: str, name: str | None = None) -> _Msg:
        return _Msg(role, content, message_tokens(count, role, content, name), identifier, name)

    history = [dict(m) for m in chat]
    if generation == "swipe" and history:
        history.pop()  # Generate(): coreChat.pop() for a swipe
    elif generation == "regenerate" and history and history[-1].get("role") == "assistant":
        history.pop()  # Generate(): the last reply is deleted before a regenerate
    if generation == "continue" and (not history or history[-1].get("role") != "assistant"):
        raise ValueError("continue needs a chat that ends with the reply to continue")

    # Card fields and prompts (preparePromptsForChatCompletion)
    description = card_field(card.description, user=user, char=char)
    personality = card_field(card.personality, user=user, char=char)
    scenario = card_field(card.scenario, user=user, char=char)
    persona = card_field(persona_description, user=user, char=char)
    main = sub(s.main_prompt)
    card_system = card_field(card.system_prompt, user=user, char=char) if s.prefer_character_prompt else ""
    if card_system:
        main = substitute(card_system, user=user, char=char, extra={"original": main})
    jailbreak = sub(s.jailbreak_prompt)
    card_jailbreak = card_field(card.post_history_instructions, user=user, char=char)
    if card_jailbreak and s.prefer_character_jailbreak:
        jailbreak = substitute(card_jailbreak, user=user, char=char, extra={"original": jailbreak})

    def wi(value: str) -> str:
        return s.wi_format.replace("{0}", value) if value and s.wi_format.strip() else value

    slots: dict[str, list[_Msg]] = {}
    budget = s.max_context - s.max_tokens - REPLY_PRIMING_TOKENS
    before = [
        ("main", main),
        ("worldInfoBefore", wi(world_info_before)),
        ("personaDescription", persona),
        ("charDescription", description),
        ("charPersonality", sub(s.personality_format, personality=personality) if personality else ""),
        ("scenario", sub(s.scenario_format, scenario=scenario) if scenario else ""),
        ("nsfw", sub(s.nsfw_prompt)),
        ("worldInfoAfter", wi(world_info_after)),
    ]
    for identifier, content in before:
        m = msg("system", content, identifier)
        slots[identifier] = [m]
        budget -= m.tokens
    controls = [msg("system", sub(s.impersonation_prompt), "impersonate")] if generation == "impersonate" else []
    budget -= sum(m.tokens for m in controls)
    jb = msg("system", jailbreak, "jailbreak")
    budget -= jb.tokens

    # Chat history (populateChatHistory)
    new_chat = msg("system", sub(s.new_chat_prompt), "newMainChat")
    budget -= new_chat.tokens
    nudge: _Msg | None = None
    if generation == "continue":
        last = str(history[-1].get("content", ""))
        if not last.endswith(" "):
            last += s.continue_postfix  # Generate() adds the postfix; the nudge trims it again
        nudge = msg("system", sub(s.continue_nudge_prompt, lastChatMessage=last.strip()), "continueNudge")
        budget -= nudge.tokens

    prepared: list[_Msg] = []
    for index, item in enumerate(history):
        role = str(item.get("role", "user"))
        content = str(item.get("content", ""))
        if index == 0 and role == "assistant":
            content = sub(content)  # the greeting reacts to name changes
        speaker = str(item.get("name") or (user if role == "user" else char))
        if s.names_behavior == "content":
            content = f"{speaker}: {content}"
        content = content.replace("\r", "")
        if role == "user" and s.wrap_in_quotes:
            content = f'"{content}"'
        content = sub(content)  # PromptManager.preparePrompt substitutes macros in every chat message
        name = _sanitize_name(speaker) if s.names_behavior == "completion" else None
        prepared.append(msg(role, content, f"chatHistory-{len(history) - index}", name))

    chat_slot: list[_Msg] = []
    if prepared and prepared[-1].role == "assistant" and s.send_if_empty:
        filler = msg("user", s.send_if_empty, "emptyUserMessageReplacement")
        if budget - filler.tokens >= 0:
            chat_slot.append(filler)
            budget -= filler.tokens
    kept = 0
    for m in reversed(prepared):
        if budget - m.tokens < 0:
            break
        chat_slot.insert(0, m)
        budget -= m.tokens
        kept += 1
    budget += new_chat.tokens
    chat_slot.insert(0, new_chat)
    budget -= new_chat.tokens
    if nudge is not None:
        chat_slot.append(nudge)

    # Example dialogues, filled after the chat (populateDialogueExamples), placed before it
    examples: list[_Msg] = []
    for dialogue in example_dialogues(card.mes_example, user=user, char=char):
        added = 0
        header = msg("system", sub(s.new_example_chat_prompt), "newChat")
        if budget - header.tokens >= 0:
            examples.append(header)
            budget -= header.tokens
        for name, content in dialogue:
            m = msg("system", content, "dialogueExamples", name)
            if budget - m.tokens < 0:
                break
            examples.append(m)
            budget -= m.tokens
            added += 1
        if added == 0 and examples:
            budget += examples.pop().tokens

    ordered = [
        *slots["main"],
        *slots["worldInfoBefore"],
        *slots["personaDescription"],
        *slots["charDescription"],
        *slots["charPersonality"],
        *slots["scenario"],
        *slots["nsfw"],
        *slots["worldInfoAfter"],
        *examples,
        *chat_slot,
        jb,
        *controls,
    ]
    ordered = [m for m in ordered if m.content]
    if s.squash_system_messages:
        ordered = _squash(ordered)

    messages = [{"role": m.role, "content": m.content, **({"name": m.name} if m.name else {})} for m in ordered]
    body = _fields(messages, s, stream=s.stream)
    return Plan(body=body, kept=kept, considered=len(prepared), budget_left=budget, messages=ordered)


# Transport (`sendOpenAIRequest`, openai.js; the `/generate` route, src/endpoints/backends/chat-completions.js):
# the upstream gets `{messages, model, temperature, max_tokens, stream, presence_penalty, frequency_penalty,
# top_p, logit_bias}` in that order (+ `stop` before logit_bias when stop strings are set, `seed` after it when
# >= 0), POSTed to `<custom url>/chat/completions` with `Authorization: Bearer <key>` ("Bearer undefined" when no
# key is saved).
def _fields(messages: list[dict[str, str]], s: Settings, *, stream: bool) -> dict[str, Any]:
    """The fields in the order the upstream receives them (chat-completions.js builds `requestBody` in this
    order; undefined ones are dropped by JSON.stringify)."""
    body: dict[str, Any] = {
        "messages": messages,
        "model": s.model,
        "temperature": _number(s.temperature),
        "max_tokens": s.max_tokens,
        "stream": stream,
        "presence_penalty": _number(s.presence_penalty),
        "frequency_penalty": _number(s.frequency_penalty),
        "top_p": _number(s.top_p),
    }
    if s.stop:
        body["stop"] = list(s.stop)
    body["logit_bias"] = {}
    if s.seed >= 0:
        body["seed"] = s.seed
    return body


def connection_test_body(settings: Settings | None = None) -> dict[str, Any]:
    """The "Test Message" button of the API panel (`testApiConnection`, openai.js): a quiet request, so never
    streamed, with the single message "Hi" and no prompt around it."""
    return _fields([{"role": "user", "content": "Hi"}], settings or Settings(), stream=False)


def _squash(messages: list[_Msg]) -> list[_Msg]:
    """ChatCompletion.squashSystemMessages: consecutive unnamed system messages joined by a newline, except the
    chat/example markers."""
    keep_apart = {"newMainChat", "newChat", "groupNudge"}

    def squashable(m: _Msg) -> bool:
        return m.role == "system" and not m.name and m.identifier not in keep_apart

    out: list[_Msg] = []
    for m in messages:
        if out and squashable(m) and squashable(out[-1]):
            out[-1] = replace(out[-1], content=out[-1].content + "\n" + m.content)
        else:
            out.append(replace(m))
    return out


def build_body(card: Card, chat: Sequence[Mapping[str, Any]], **options: Any) -> dict[str, Any]:
    """`plan_body(...).body`: the JSON object the upstream (our proxy) receives."""
    return plan_body(card, chat, **options).body


def greeting(card: Card, *, user: str = "User") -> dict[str, str]:
    """The first message of a new chat: the card's first_mes, macros expanded."""
    return {"role": "assistant", "content": substitute(card.first_mes, user=user, char=card.name)}
