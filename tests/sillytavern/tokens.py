"""The tokens SillyTavern charges for a message, counted with tiktoken's vocabulary for the model's name."""

from __future__ import annotations

from collections.abc import Callable

# Token count of one message (`countTokensOpenAI`, public/scripts/tokenizers.js, and `/openai/count`,
# src/endpoints/tokenizers.js): tiktoken tokens of role + content (+ name + 1) + 3 per message + 3 padding,
# then -1 and -2 on the client: content + role + 3 (content + role + name + 4 with a name); an empty message
# counts 0. The tokenizer is tiktoken for the model name: names with gpt-4o/o1/chatgpt-4o-latest use
# o200k_base, anything not matching another family (deepseek-chat, for one) falls back to gpt-3.5-turbo's
# cl100k_base. (Names containing claude, llama, mistral, yi, gemma, jamba, qwen2, command-r or nemo get other
# tokenizers in SillyTavern; this builder counts those with cl100k_base too, so its cut may differ there.)
#
# With splintr's cl100k_base (the `splintr-rs` wheel the project already depends on) the cut matches
# SillyTavern exactly on every recorded body (tests/unit/test_sillytavern_bodies.py). Without it a chars/4
# estimate is used, which on English role-play text is within about 10 % and so may keep a message or two
# more or fewer than SillyTavern at the cut.

TokenCounter = Callable[[str], int]


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
