"""schemathesis hooks for `st run` against changji, loaded by `schemathesis.toml` (README: Probes).

- Idempotency keys: every generated request that carries a valid `Idempotency-Key` gets a key of its own. A
  key names one request for good (a retry gets the stored answer; the same key with another body is refused,
  422), and generated keys repeat ("0", "a") across operations and bodies; a client makes a key per request,
  and so does this.
- Files: a PNG card (`image/png`), a CHARX card (`application/zip`) and a SillyTavern chat
  (`application/jsonl`) are generated as real files of their kind, as the schema's `format: binary` cannot say
  what a file holds.
- Rules of the state: a well-formed request that a rule of what it acts on refuses (RFC 9457 title "Rule
  Violated": turns alternate, only a reply is revised, only a waiting reply is answered, nothing to compact
  yet…) is not a schema that is looser than the validation, so it is not counted as one; nor is a 404 that
  names an id in the body (a generated node or card that does not exist) a created resource gone missing.
"""

from __future__ import annotations

import io
import json
import re
import uuid
import zipfile
from typing import Any

import schemathesis
from hypothesis import strategies as st

from api.http import IDEMPOTENCY_KEY_PATTERN
from interchange.card_export import card_json, card_png

KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
RULE_VIOLATED = "Rule Violated"
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)
NAMES = WORDS.filter(lambda name: name.strip() != "" and len(name) <= 200)
CARDS = st.fixed_dictionaries({"name": NAMES}, optional={"first_mes": WORDS, "description": WORDS})


@schemathesis.hook
def before_call(context: Any, case: Any, **kwargs: Any) -> None:
    key = (case.headers or {}).get("Idempotency-Key")
    if isinstance(key, str) and KEY.fullmatch(key):
        case.headers["Idempotency-Key"] = f"{key[:200]}.{uuid.uuid4().hex}"


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    kind = type(failure).__name__
    if kind not in ("RejectedPositiveData", "EnsureResourceAvailability"):
        return True
    try:
        problem = json.loads(response.content)
    except ValueError:
        return True
    if not isinstance(problem, dict):
        return True
    if kind == "RejectedPositiveData":
        return bool(response.status_code != 422 or problem.get("title") != RULE_VIOLATED)
    fields = [str(error.get("field", "")) for error in problem.get("errors") or [] if isinstance(error, dict)]
    return not (fields and all(field.startswith("body.") for field in fields))


def _charx(data: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("card.json", card_json(data, "v3"))
    return out.getvalue()


@st.composite
def _chats(draw: st.DrawFn) -> bytes:
    said = draw(st.lists(NAMES, min_size=1, max_size=6))
    rows: list[dict[str, Any]] = [{"user_name": "User", "character_name": "Char", "chat_metadata": {}}]
    rows += [{"name": "Char", "is_user": False, "is_system": False, "mes": draw(NAMES)}]
    rows += [{"name": "User", "is_user": i % 2 == 0, "is_system": False, "mes": text} for i, text in enumerate(said)]
    return "\n".join(json.dumps(row, ensure_ascii=False) for row in rows).encode()


schemathesis.openapi.media_type("image/png", CARDS.map(lambda data: card_png(data, None)))
schemathesis.openapi.media_type("application/zip", CARDS.map(_charx))
schemathesis.openapi.media_type("application/jsonl", _chats())
