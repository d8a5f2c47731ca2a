"""Build the chat-completion request body SillyTavern 1.12.x sends to a "Custom (OpenAI-compatible)" URL.

Our own code, written from a reading of SillyTavern 1.12.6 (tag `1.12.6`, commit 648e70b8c) and checked
against bodies recorded from a real 1.12.6 (tests/fixtures/sillytavern/, README there). Nothing here is
copied from SillyTavern (AGPL-3.0); the facts it relies on, with the files they come from:

Defaults (`default/content/settings.json`, copied into a fresh install's settings; `public/scripts/openai.js`
`default_settings` where settings.json is silent):
  * context 4095 (`openai_max_context`), response 300 (`openai_max_tokens`), temperature 1, top_p 1,
    frequency/presence penalty 0, streaming on (`stream_openai: true` in settings.json; the code default is off).
  * Main prompt "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}." (settings.json;
    the code's own default says {{charIfNotGroup}}, the same text outside group chats). Auxiliary ("nsfw") and
    Post-History Instructions ("jailbreak") prompts are empty, so they send nothing.
  * "[Start a new Chat]", "[Example Chat]", the continue nudge "[Continue the following message. Do not include
    ANY parts of the original message. Use capitalization and punctuation as if your reply is a part of the
    original message: {{lastChatMessage}}]", the impersonation prompt of settings.json (it has "Write 1 reply
    only in internet RP style."; the code default lacks that sentence), personality format
    "[{{char}}'s personality: {{personality}}]", scenario format "[Circumstances and context of the dialogue:
    {{scenario}}]", World Info format "{0}".
  * names_behavior 0 ("default": no `name` field on chat messages, no "Name: " prefix outside groups),
    wrap_in_quotes off, send_if_empty "", squash_system_messages off, continue_prefill off, continue_postfix " ",
    seed -1 (not sent), no stop strings (not sent), no logit-bias preset (an empty `logit_bias: {}` is sent).

Prompt order (`public/scripts/PromptManager.js` `promptManagerDefaultPromptOrder`, the "global" order a fresh
install uses): main, worldInfoBefore, personaDescription, charDescription, charPersonality, scenario,
enhanceDefinitions (disabled), nsfw, worldInfoAfter, dialogueExamples, chatHistory, jailbreak. An empty prompt
sends no message. A card's `system_prompt` replaces main and its `post_history_instructions` replace jailbreak
(`preparePromptsForChatCompletion` in openai.js; "prefer character prompt/jailbreak" are on by default).
Card fields are trimmed, macro-expanded and stripped of "\\r" (`getCharacterCardFields`/`baseChatReplace`,
public/script.js).

Budget and the cut (`populateChatCompletion`, `populateChatHistory`, `populateDialogueExamples`, class
`ChatCompletion` in openai.js):
  * budget = max_context - max_tokens, minus 3 ("every reply is primed"), minus each prompt before the chat,
    minus the control prompts (impersonation) which go last, minus the "[Start a new Chat]" marker and, for a
    continue, the nudge (both reserved first, placed afterwards).
  * Then the chat, newest to oldest: a message is kept while budget - its tokens >= 0; the first one that does
    not fit stops the walk (nothing older is tried). "[Start a new Chat]" is always put at the top of what was
    kept, so it survives the cut; the greeting is an ordinary assistant message and is cut like any other.
  * Example dialogues (mes_example) are filled after the chat (unless "pin examples"), each block opened by
    "[Example Chat]", as `system` messages named `example_user` / `example_assistant`; they are placed before
    the chat.
  * Token count of one message (`countTokensOpenAI`, public/scripts/tokenizers.js, and `/openai/count`,
    src/endpoints/tokenizers.js): tiktoken tokens of role + content (+ name + 1) + 3 per message + 3 padding,
    then -1 and -2 on the client: content + role + 3 (content + role + name + 4 with a name); an empty message
    counts 0. The tokenizer is tiktoken for the model name: names with gpt-4o/o1/chatgpt-4o-latest use
    o200k_base, anything not matching another family (deepseek-chat, for one) falls back to gpt-3.5-turbo's
    cl100k_base. (Names containing claude, llama, mistral, yi, gemma, jamba, qwen2, command-r or nemo get other
    tokenizers in SillyTavern; this builder counts those with cl100k_base too, so its cut may differ there.)

Generation types (`Generate` in public/script.js, `populateChatHistory`/`populateChatCompletion` in openai.js):
  * swipe: the swiped reply is dropped from the chat before the prompt is built, so the body equals the one
    that produced the reply (recorded: byte-identical).
  * regenerate: SillyTavern deletes the last reply from the chat, then builds the same body.
  * continue: the chat still ends with the reply; the nudge (with that reply, trimmed) is the last message of
    the chat history, a `system` message.
  * impersonate: the impersonation prompt is a `system` message after everything else.

Transport (`sendOpenAIRequest`, openai.js; the `/generate` route, src/endpoints/backends/chat-completions.js):
the upstream gets `{messages, model, temperature, max_tokens, stream, presence_penalty, frequency_penalty,
top_p, logit_bias}` in that order (+ `stop` before logit_bias when stop strings are set, `seed` after it when
>= 0), POSTed to `<custom url>/chat/completions` with `Authorization: Bearer <key>` ("Bearer undefined" when no
key is saved).

What this builder does not model: World Info activation (pass the text SillyTavern's world-info.js produced
as `world_info_before`/`world_info_after`), Author's Note and other extension prompts, group chats, quiet
prompts, images, instruct mode.

Token counts: with splintr's cl100k_base (the `splintr-rs` wheel the project already depends on) the cut
matches SillyTavern exactly on every recorded body (tests/unit/test_sillytavern_bodies.py). Without it a
chars/4 estimate is used, which on English role-play text is within about 10 % and so may keep a message
or two more or fewer than SillyTavern at the cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Generation = Literal["normal", "regenerate", "swipe", "continue", "impersonate"]
NamesBehavior = Literal["none", "default", "completion", "content"]
TokenCounter = Callable[[str], int]

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
REPLY_PRIMING_TOKENS = 3


@dataclass(frozen=True)
class Card:
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""

    @classmethod
    def from_json(cls, card: Mapping[str, Any]) -> Card:
        """A chara_card_v2/v3 JSON (or its `data`), or a V1 card."""
        data = card.get("data") if isinstance(card.get("data"), Mapping) else card
        assert isinstance(data, Mapping)

        def text(key: str) -> str:
            value = data.get(key)
            return value if isinstance(value, str) else ""

        return cls(
            name=text("name"),
            description=text("description"),
            personality=text("personality"),
            scenario=text("scenario"),
            first_mes=text("first_mes"),
            mes_example=text("mes_example"),
            system_prompt=text("system_prompt"),
            post_history_instructions=text("post_history_instructions"),
        )


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


# --- token counting -------------------------------------------------------------------------------------------


def _tiktoken_family(model: str) -> str:
    """SillyTavern's server-side choice (`getTokenizerModel`, src/endpoints/tokenizers.js), for tiktoken models."""
    if any(key in model for key in ("o1-preview", "o1-mini", "gpt-4o", "chatgpt-4o-latest")):
        return "o200k_base"
    return "cl100k_base"


def counter_for_model(model: str) -> TokenCounter:
    """Exact tiktoken counts through splintr (shipped vocabularies, no download); chars/4 if it cannot load."""
    try:
        from splintr import Tokenizer

        tokenizer = Tokenizer.from_pretrained(_tiktoken_family(model))
    except Exception:  # pragma: no cover - the wheel is a project dependency
        return lambda text: (len(text) + 3) // 4

    def count(text: str) -> int:
        return len(tokenizer.encode_ordinary(text))

    return count


def message_tokens(count: TokenCounter, role: str, content: str, name: str | None = None) -> int:
    """Tokens SillyTavern charges for one message; 0 for an empty one (openai.js `Message`)."""
    if not content:
        return 0
    tokens = count(role) + count(content) + 3
    if name:
        tokens += count(name) + 1
    return tokens


# --- macros ---------------------------------------------------------------------------------------------------


def substitute(text: str, *, user: str, char: str, extra: Mapping[str, str] | None = None) -> str:
    """The macros a default single-character chat uses (`substituteParams`/`evaluateMacros`, public/script.js and
    public/scripts/macros.js): {{user}}, {{char}}, {{charIfNotGroup}}, <USER>, <BOT>, <CHAR>, and any extra
    {{name}} given (e.g. lastChatMessage, personality, scenario, original), all case-insensitive."""
    values = {"user": user, "char": char, "charifnotgroup": char}
    for key, value in (extra or {}).items():
        values[key.lower()] = value

    def macro(match: re.Match[str]) -> str:
        key = match.group(1).strip().lower()
        return values.get(key, match.group(0))

    text = re.sub(r"\{\{([^{}]+)\}\}", macro, text)
    text = re.sub(r"<USER>", user, text, flags=re.IGNORECASE)
    text = re.sub(r"<BOT>", char, text, flags=re.IGNORECASE)
    text = re.sub(r"<CHAR>", char, text, flags=re.IGNORECASE)
    text = re.sub(r"<CHARIFNOTGROUP>", char, text, flags=re.IGNORECASE)
    return text


def _card_field(value: str, *, user: str, char: str) -> str:
    return substitute(value.strip(), user=user, char=char).replace("\r", "")


# --- example dialogues ----------------------------------------------------------------------------------------


def example_dialogues(mes_example: str, *, user: str, char: str) -> list[list[tuple[str, str]]]:
    """Blocks of (name, content) with name example_user/example_assistant (`parseMesExamples` in script.js,
    `setOpenAIMessageExamples`/`parseExampleIntoIndividual` in openai.js)."""
    text = _card_field(mes_example, user=user, char=char)
    if not text or text == "<START>":
        return []
    if not text.startswith("<START>"):
        text = "<START>\n" + text.strip()
    blocks = [f"<START>\n{block.strip()}\n" for block in re.split(r"<START>", text, flags=re.IGNORECASE)[1:]]
    return [_example_block(block, user=user, char=char) for block in blocks]


def _example_block(block: str, *, user: str, char: str) -> list[tuple[str, str]]:
    """One <START> block as (name, content) messages; its first line (the heading) is skipped."""
    lines = re.sub(r"<START>", "{Example Dialogue:}", block, count=1, flags=re.IGNORECASE).replace("\r", "")
    result: list[tuple[str, str]] = []
    current: list[str] = []
    in_user = in_bot = False

    def flush(speaker: str, system_name: str) -> None:
        joined = "\n".join(current).replace(speaker + ":", "", 1).strip()
        result.append((system_name, joined))
        current.clear()

    for line in lines.split("\n")[1:]:
        if line.startswith(user + ":"):
            in_user = True
            if in_bot:
                flush(char, "example_assistant")
            in_bot = False
        elif line.startswith(char + ":"):
            in_bot = True
            if in_user:
                flush(user, "example_user")
            in_user = False
        current.append(line)
    if in_user:
        flush(user, "example_user")
    elif in_bot:
        flush(char, "example_assistant")
    return result


# --- the builder ----------------------------------------------------------------------------------------------


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
    description = _card_field(card.description, user=user, char=char)
    personality = _card_field(card.personality, user=user, char=char)
    scenario = _card_field(card.scenario, user=user, char=char)
    persona = _card_field(persona_description, user=user, char=char)
    main = sub(s.main_prompt)
    card_system = _card_field(card.system_prompt, user=user, char=char) if s.prefer_character_prompt else ""
    if card_system:
        main = substitute(card_system, user=user, char=char, extra={"original": main})
    jailbreak = sub(s.jailbreak_prompt)
    card_jailbreak = _card_field(card.post_history_instructions, user=user, char=char)
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
