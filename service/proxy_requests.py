"""A proxied request's body read. A front end sends its whole history every time, and all of it but the
last messages is what it sent the time before: the reader keeps the recent long bodies it read (their
bytes, their messages and where each message ends), and a body that repeats one of them byte for byte up
to a message's end is read from there on — the bytes compared (a memcmp), the new messages parsed, the
split and the chat's digests carried on. Any other body, or a tail that does not read, is read whole
(`orjson`), and that reading is the authority on what is wrong with a body.

What is carried on: the split up to the kept body's last chat message (the system messages after it, a
post-history instruction, may differ: they are read again), and the digests made of its chat."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from array import array
from collections.abc import Mapping, MutableSequence, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from domain.tree.rules.reconcile import ChatMessage, SplitRequest, split_request

KEEP_FROM = 64 << 10  # bodies shorter than this are read whole each time (it costs less than keeping them)
KEPT_BODIES, KEPT_PER_TENANT = 32, 4  # the bodies kept (the least recently used first out), and of one tenant
KEPT_BYTES = 128 << 20  # ... and their size, a body counted at HELD times its bytes (its messages parsed)
HELD = 4
TRAILING = 16  # system messages after a kept chat's last message a new body may leave behind
_SPACE = re.compile(r"[ \t\n\r]*")


class BadRequest(ValueError):
    """A body that is not a chat-completions request; `field` is the one at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """A request read: its fields but the messages, its messages, their split and the chat's digests."""

    fields: Mapping[str, Any]
    messages: Sequence[Mapping[str, Any]]
    split: SplitRequest
    digests: ChatDigests
    carried: int = 0  # the bytes read from a kept body rather than parsed (0: read whole)


@dataclass(frozen=True, slots=True)
class _Kept:
    tenant_id: str
    raw: bytes
    head: dict[str, Any]  # the fields before the messages
    ends: array[int]  # the byte offset just past each message
    last_chat: int  # the index of the last user or assistant message
    request: ProxyRequest


class RequestReader:
    """Reads request bodies, carrying on from the kept body a new one repeats. Thread-safe."""

    def __init__(
        self,
        bodies: int = KEPT_BODIES,
        kept_bytes: int = KEPT_BYTES,
        keep_from: int = KEEP_FROM,
        per_tenant: int = KEPT_PER_TENANT,
    ) -> None:
        self._bodies, self._bytes, self._keep_from, self._per_tenant = bodies, kept_bytes, keep_from, per_tenant
        self._kept: list[_Kept] = []  # the most recently used last
        self._lock = threading.Lock()

    def read(self, tenant_id: str, raw: bytes) -> ProxyRequest:
        """The request in `raw`; BadRequest when it is not one."""
        return self.read_on(tenant_id, raw) or self.read_whole(tenant_id, raw)

    def read_on(self, tenant_id: str, raw: bytes, most: int | None = None) -> ProxyRequest | None:
        """The request read on from a kept body it repeats (its new messages only); None when there is
        none, or the rest does not read (then read it whole), or it is longer than `most` bytes (a caller
        on the event loop reads no more than that there)."""
        found = self._repeated(tenant_id, raw)
        if found is None:
            return None
        kept, index = found
        if most is not None and len(raw) - kept.ends[index] > most:
            return None
        try:
            return self._carried(kept, index, raw)
        except (ValueError, IndexError, orjson.JSONDecodeError, RecursionError):
            return None  # (read whole: that reading says what is wrong)

    def read_whole(self, tenant_id: str, raw: bytes) -> ProxyRequest:
        """The request read whole (and kept when long); BadRequest when it is not one."""
        request = read_whole(raw)
        if len(raw) >= self._keep_from:
            self._keep_whole(tenant_id, raw, request)
        return request

    def _repeated(self, tenant_id: str, raw: bytes) -> tuple[_Kept, int] | None:
        """The kept body `raw` repeats furthest, to the end of its last chat message or of a system
        message after it, and the index of that message."""
        best: tuple[_Kept, int] | None = None
        with self._lock:
            kept = [k for k in self._kept if k.tenant_id == tenant_id]
        view_of = memoryview
        for body in kept:
            for index in range(len(body.ends) - 1, max(body.last_chat, len(body.ends) - 1 - TRAILING) - 1, -1):
                end = body.ends[index]
                if best is not None and end <= best[0].ends[best[1]]:
                    break
                if raw.startswith(view_of(body.raw)[:end]):
                    best = (body, index)
                    break
        return best

    def _carried(self, kept: _Kept, index: int, raw: bytes) -> ProxyRequest | None:
        """The request read on from the kept body's message at `index`; None when the rest is not a list's
        tail and the body's end (read whole)."""
        start = kept.ends[index]
        tail = raw[start:].decode()
        added, ends, rest = _tail(tail, start)
        if rest is None or any(type(m) is not dict for m in added):
            return None
        fields = {**kept.head, **rest}
        check_fields(fields)
        before = kept.request.split
        if before.tool_round:  # (where a round began is not kept: read whole)
            return None
        if index < len(kept.ends) - 1:  # the system messages after the chat that are repeated
            said = kept.request.messages[kept.last_chat + 1 : index + 1]
            before = replace(before, after=before.after[: sum(m.get("role") in ("system", "developer") for m in said)])
        split = split_request(added, before)
        messages = [*kept.request.messages[: index + 1], *added]
        digests = ChatDigests(split, kept.request.digests, len(before.chat))
        request = ProxyRequest(fields, messages, split, digests, start)
        last_chat = next(
            (index + 1 + i for i in range(len(added) - 1, -1, -1) if added[i].get("role") in ("user", "assistant")),
            kept.last_chat,
        )
        offsets = kept.ends[: index + 1]
        offsets.extend(ends)
        self._keep(_Kept(kept.tenant_id, raw, kept.head, offsets, last_chat, request), kept)  # (the chat went on)
        return request

    def _keep_whole(self, tenant_id: str, raw: bytes, request: ProxyRequest) -> None:
        scanned = _scan(raw)
        if scanned is None:
            return
        keys, ends = scanned
        head = {key: request.fields[key] for key in keys if key in request.fields}
        messages = request.messages
        last_chat = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") in ("user", "assistant")), -1)  # fmt: skip
        if last_chat >= 0 and len(ends) == len(messages):
            self._keep(_Kept(tenant_id, raw, head, ends, last_chat, request), None)

    def _keep(self, body: _Kept, superseded: _Kept | None) -> None:
        with self._lock:
            kept = [k for k in self._kept if k is not superseded and k.raw is not body.raw] + [body]
            mine = [k for k in kept if k.tenant_id == body.tenant_id]
            for old in mine[: max(len(mine) - self._per_tenant, 0)]:
                kept.remove(old)
            while len(kept) > self._bodies or HELD * sum(len(k.raw) for k in kept) > self._bytes:
                del kept[0]
            self._kept = kept


def read_whole(raw: bytes) -> ProxyRequest:
    """A body read whole and checked."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BadRequest("the body is not JSON", "body") from None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadRequest("messages must be a non-empty list", "messages")
    messages = body.pop("messages")
    if any(type(m) is not dict for m in messages):
        raise BadRequest("every message must be an object", "messages")
    check_fields(body)
    split = split_request(messages)
    return ProxyRequest(body, messages, split, ChatDigests(split))


def check_fields(fields: Mapping[str, Any]) -> None:
    if not isinstance(fields.get("stream", False), bool):
        raise BadRequest("stream must be true or false", "stream")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # (NaN and Infinity: orjson refuses them too)


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _tail(text: str, start: int) -> tuple[list[Any], list[int], dict[str, Any] | None]:
    """After a kept message's end: the messages that follow (and the byte offsets past each), and the
    fields after the list (None: this is not a list's tail and a body's end)."""
    added: list[Any] = []
    ends: list[int] = []
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[i] == ",":
        first = i + 1
        i, last = _messages(text, i, start, ends)
        added = orjson.loads("[" + text[first:last] + "]")  # as a whole body's reading reads them
    if text[i] != "]":
        return added, ends, None
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    if text[i] == "}":
        return added, ends, {} if _SPACE.fullmatch(text, i + 1) else None
    if text[i] != "," or text[_SPACE.match(text, i + 1).end()] == "}":  # type: ignore[union-attr]
        return added, ends, None  # (a comma before the end: not JSON)
    rest = orjson.loads("{" + text[i + 1 :])
    if not isinstance(rest, dict) or "messages" in rest:
        return added, ends, None
    return added, ends, rest


def _messages(text: str, i: int, base: int, ends: MutableSequence[int]) -> tuple[int, int]:
    """Past the messages of a list, from the `[` or `,` at `i`: the byte offset just past each one is
    appended to `ends` (`base`: the bytes before `text`), and where the next character after them is
    and where the last message ends (in `text`) are returned. Only where each ends is read here."""
    ascii_only, counted, counted_to = text.isascii(), base, 0
    while True:
        i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
        _, i = _DECODER.raw_decode(text, i)
        last = i
        if ascii_only:
            ends.append(base + i)
        else:
            counted, counted_to = counted + len(text[counted_to:i].encode()), i
            ends.append(counted)
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if text[i] != ",":
            return i, last


def _scan(raw: bytes) -> tuple[list[str], array[int]] | None:
    """The keys before `messages` in a body, and the byte offset just past each message (None: not read)."""
    text = raw.decode()
    keys: list[str] = []
    ends: array[int] = array("q")
    try:
        i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
        if text[i] != "{":
            return None
        while True:
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            key, i = _DECODER.raw_decode(text, i)
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i] != ":":
                return None
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            if key == "messages":
                break
            keys.append(key)
            _, i = _DECODER.raw_decode(text, i)
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i] != ",":
                return None
        i, _ = _messages(text, i, 0, ends)
        if text[i] != "]":
            return None
        later = _later_keys(text, i + 1)
        if later is None or "messages" in later or set(later) & set(keys) or len(set(keys)) < len(keys):
            return None  # (a key twice: which of them a reading keeps is not for carrying on to decide)
        return keys, ends
    except (ValueError, IndexError, RecursionError):
        return None


def _later_keys(text: str, i: int) -> list[str] | None:
    """The keys of the fields after the messages, from just past the list (None: not an object's end)."""
    keys: list[str] = []
    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
    while text[i] == ",":
        i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
        key, i = _DECODER.raw_decode(text, i)
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if text[i] != ":":
            return None
        _, i = _DECODER.raw_decode(text, _SPACE.match(text, i + 1).end())  # type: ignore[union-attr]
        keys.append(key)
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
    return keys if text[i] == "}" and _SPACE.fullmatch(text, i + 1) else None


class ChatDigests:
    """Digests of a request's chat up to any of its messages — the greeting, then the first k messages —
    each made with one join and one hash (a history is long; a per-message hash in Python is not cheap).
    `seed`: the digests of a request whose chat this one repeats up to `upto` messages (those made up to
    there hold for this one)."""

    def __init__(self, split: SplitRequest, seed: ChatDigests | None = None, upto: int = 0) -> None:
        self._chat = split.chat
        self._greeting = (split.greeting or "").strip().encode()
        self._states: dict[int, Any] = {}
        self._lock = threading.Lock()  # (a kept request's digests are read by the next one's reader)
        if seed is not None:
            with seed._lock:
                self._states = {k: state for k, state in seed._states.items() if k <= upto}

    def __len__(self) -> int:
        return len(self._chat) + 1

    def at(self, k: int) -> bytes:
        return bytes(self._state(k).digest())

    def then(self, k: int, message: ChatMessage) -> bytes:
        """The digest of the first k messages and `message` after them."""
        following = self._state(k).copy()
        following.update(f"\x1e{message.role}\x1f{message.text.strip()}".encode())
        return bytes(following.digest())

    def _state(self, k: int) -> Any:
        """The hash after k messages, from the nearest one made before it (its copy, and what lies between)."""
        with self._lock:
            if k not in self._states:
                below = max((i for i in self._states if i < k), default=None)
                if below is None:
                    hashed, below = hashlib.blake2b(self._greeting, digest_size=16), 0
                else:
                    hashed = self._states[below].copy()
                if k > below:
                    parts = (f"{m.role}\x1f{m.text.strip()}" for m in self._chat[below:k])
                    hashed.update(("\x1e" + "\x1e".join(parts)).encode())
                self._states[k] = hashed
            return self._states[k]
