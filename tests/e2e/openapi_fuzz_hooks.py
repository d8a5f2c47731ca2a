"""schemathesis hooks for `st run` against changji, loaded by `schemathesis.toml` (README: Probes).

- Idempotency keys: every generated request that carries a valid `Idempotency-Key` gets a key of its own. A
  key names one request for good (a retry gets the stored answer; the same key with another body is refused,
  422), and generated keys repeat ("0", "a") across operations and bodies; a client makes a key per request,
  and so does this.
- Files: a PNG card (`image/png`), a CHARX card (`application/zip`) and a SillyTavern chat
  (`application/jsonl`) are generated as real files of their kind, as the schema's `format: binary` cannot say
  what a file holds.
- Real things to act on: half the valid requests the fuzzing phase generates whose path names a card, story,
  node, lorebook, entry, save point or card-memory item get one that exists, and so do the ids their bodies
  name. They are made once per run through the API itself (a card with a lorebook, an entry and a memory
  with an item, a story with a turn, a save), and made anew every FRESH such requests, as the fuzzer deletes
  them; so the fuzzer reaches what an id leads to, not only its 404. (The stateful phase follows the links.)
- Rules of the state: a well-formed request that a rule of what it acts on refuses (RFC 9457 title "Rule
  Violated": turns alternate, only a reply is revised, only a waiting reply is answered, nothing to compact
  yet…) is not a schema that is looser than the validation, so it is not counted as one; nor is a 404 that
  names an id in the body (a generated node or card that does not exist) a created resource gone missing.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import urllib.request
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
    params = case.path_parameters
    meta = case.meta
    fuzzing = meta is not None and meta.phase.name.value == "fuzzing" and meta.generation.mode.value == "positive"
    if params and fuzzing and CHOICE.random() < 0.5:
        _used[0] += 1
        if _used[0] % FRESH == 0:  # (what the fuzzer deleted or merged away meanwhile: made anew)
            _made.clear()
        real = _world(case.operation.base_url)
        for name in params:
            if name in real:
                params[name] = real[name]
        if isinstance(case.body, dict):  # (the ids a body names, as the path's)
            for name, value in list(case.body.items()):
                taken = BODY_TAKES.get(name)
                if taken in real and isinstance(value, str):
                    case.body[name] = real[taken]


CHOICE = random.Random(1)
FRESH = 100  # requests given real ids before new ones are made
BODY_TAKES = {"story_id": "story_id", "card_id": "card_id", "node_id": "node_id", "into": "card_id"}
_made: dict[str, Any] = {}
_used = [0]


def _world(base: str) -> dict[str, Any]:
    """Things that exist, made once: ids by the path parameter that names them."""
    if not _made:
        card = _call(base, "POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
        book = {"name": "北屿", "entries": {"0": {"uid": 0, "key": ["灯塔"], "content": "灯塔在岬角尽头。"}}}
        lorebook = _call(base, "POST", f"/v1/cards/{card['id']}/lorebooks", book)
        story = _call(base, "POST", "/v1/stories", {"card_id": card["id"]})
        _call(base, "POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": "灯还亮着吗？"})
        reply = _call(base, "POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": "亮着。"})
        save = _call(base, "POST", f"/v1/stories/{story['id']}/saves", {"name": "风暴夜"})
        memory = _call(base, "POST", f"/v1/cards/{card['id']}/memory/sync", None)["memory"]
        tag = f"[局:{story['id'].replace('-', '')[:8]}]"
        handbook = {"text": memory["handbook"]["text"] + f"\n# 世界既定事实（跨局）\n- 灯塔在岬角尽头 {tag}\n"}
        memory = _call(base, "PUT", f"/v1/cards/{card['id']}/memory/handbook", handbook)
        _made.update(card_id=card["id"], lorebook_id=lorebook["id"], uid=0, story_id=story["id"],
                     node_id=reply["node"]["id"], save_id=save["id"], worldline_id=save["worldline_id"],
                     item_id=memory["handbook"]["items"][0]["item_id"])  # fmt: skip
    return _made


def _call(base: str, method: str, path: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {os.environ['CHANGJI_KEY']}", "Content-Type": "application/json"}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base.rstrip("/") + path, data, headers, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


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
