"""The reply's words as the model writes them through its tools: the `content` of a `draft_write` or
`draft_append` call, decoded from the call's JSON arguments as their fragments stream in, so a player
sees the reply being written rather than all of it at the end.

`ContentStream.feed(fragment)` gives the characters of the `content` string that the fragments so far
complete (an escape cut in two waits for its other half); `separator()` the call's `separator` when the
model wrote it before the content (else the default a `draft_append` joins with). Pure: no I/O, no model.
"""

from __future__ import annotations

import json
import re

from domain.tree.rules.drafting import APPEND_SEPARATOR

STREAMED_TOOLS = frozenset({"draft_write", "draft_append"})
_OPENING = re.compile(r'"content"\s*:\s*"')
_SEPARATOR = re.compile(r'"separator"\s*:\s*("(?:[^"\\]|\\.)*")')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class ContentStream:
    def __init__(self) -> None:
        self.raw = ""
        self.at: int | None = None  # where the content string's next raw character is, once it began
        self.opened_at = 0  # where the content's key began in the raw arguments
        self.done = False
        self.at_all = False  # some of the content was passed on already (the engine's mark)
        self._high: str | None = None  # a high surrogate waiting for its low half

    def feed(self, fragment: str) -> str:
        """The content characters these arguments' fragments add (empty when none yet)."""
        if self.done:
            return ""
        self.raw += fragment
        if self.at is None:
            found = _OPENING.search(self.raw)
            if found is None:
                return ""
            self.at, self.opened_at = found.end(), found.start()
        out: list[str] = []
        raw, i = self.raw, self.at
        while i < len(raw):
            char = raw[i]
            if char == '"':
                self.done = True
                i += 1
                break
            if char != "\\":
                out.append(char)
                i += 1
                continue
            if i + 1 >= len(raw):
                break  # the escape's other half has not arrived
            kind = raw[i + 1]
            if kind == "u":
                if i + 6 > len(raw):
                    break
                try:
                    code = int(raw[i + 2 : i + 6], 16)
                except ValueError:  # not JSON after all: stop streaming, the tool call says the rest
                    self.done = True
                    break
                out.append(self._unit(chr(code)))
                i += 6
                continue
            out.append(_ESCAPES.get(kind, kind))
            i += 2
        self.at = i
        return "".join(out)

    def separator(self) -> str:
        """The call's `separator`, if the arguments gave it before the content; else the default."""
        found = _SEPARATOR.search(self.raw, 0, self.opened_at if self.at is not None else len(self.raw))
        if found is None:
            return APPEND_SEPARATOR
        try:
            value = json.loads(found.group(1))
        except ValueError:
            return APPEND_SEPARATOR
        return value if isinstance(value, str) else APPEND_SEPARATOR

    def _unit(self, char: str) -> str:
        """A \\u escape's character, joining surrogate pairs (a lone half is dropped)."""
        if "\ud800" <= char <= "\udbff":
            self._high = char
            return ""
        if "\udc00" <= char <= "\udfff":
            high, self._high = self._high, None
            return (high + char).encode("utf-16", "surrogatepass").decode("utf-16") if high else ""
        return char
