"""A card's handbook: what its stories left behind, as data with its provenance.

The handbook is read and written as text (what the side model is shown and answers, what a user edits),
and held as structure: a block per story (its title and its text), then cross-story sections whose items
each end with the tags of the stories that support them. A tag names a story by the first hex digits of
its id (`[局:1a2b3c4d]` in a Chinese card's memory, `[story:1a2b3c4d]` in an English one's; either is
read): a whole UUID costs some twenty tokens a tag, and within one card 8 digits tell its stories apart
(`Tags` lengthens the tags of stories whose ids begin alike until they differ).

Parsing refuses (MemoryTextError) what the program cannot keep as data: an item without a tag, a tag of
no story of the card, a heading it does not know, text outside any heading, a story block twice.
`check_merge` refuses a merge that drops a story it was given or names one it was told to forget, so a
half-written answer is never kept. `forget` removes a story by the program's rule, not the model's:
items only it supports go, items others support too lose only its tag (and are returned, for a rewrite
that makes them consistent), its block goes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from domain.errors import DomainError
from domain.language import Language

SECTIONS: dict[Language, tuple[str, ...]] = {
    "zh": ("人物（跨局）", "世界既定事实（跨局）", "用户的玩法偏好（跨局）"),
    "en": ("Characters (across stories)", "Established facts (across stories)",
           "The user's play preferences (across stories)"),
}  # fmt: skip
SECTION_KEYS = ("characters", "facts", "preferences")  # the same three sections, whatever the language
TAG_WORD: dict[Language, str] = {"zh": "局", "en": "story"}
BLOCK_WORD: dict[Language, str] = {"zh": "局", "en": "Story"}
SHORT = 8  # hex digits of a story id in a tag

_TAG = re.compile(r"\[(?:局|(?i:story))\s*[:：]\s*([0-9a-fA-F]{8,32})\]")
_TAGS_AT_END = re.compile(r"(?:\s*\[(?:局|(?i:story))\s*[:：]\s*[0-9a-fA-F]{8,32}\])+\s*$")
_BLOCK = re.compile(r"^#\s*(?:局|(?i:story))\s*[：:]\s*(.*?)\s*[（(]\s*([0-9a-fA-F]{8,32})\s*[）)]\s*$")
_ITEM = re.compile(r"^\s*[-*•]\s+(.*)$")
_SECTION_OF = {name: key for names in SECTIONS.values() for name, key in zip(names, SECTION_KEYS, strict=True)}


class MemoryTextError(DomainError):
    """A handbook's text cannot be kept as data (or a merge would lose what it was given)."""


@dataclass(frozen=True, slots=True)
class Item:
    """One cross-story item: its section (a key of SECTION_KEYS), its words (without tags), the stories
    that support it, in the order they were tagged."""

    section: str
    text: str
    sources: tuple[UUID, ...]

    @property
    def item_id(self) -> str:
        """Stable while its section and words are: the audit's handle on it."""
        return hashlib.sha256(f"{self.section}\n{self.text}".encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class StoryBlock:
    story_id: UUID
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Handbook:
    blocks: tuple[StoryBlock, ...] = ()
    items: tuple[Item, ...] = ()

    @property
    def stories(self) -> set[UUID]:
        """Every story the handbook holds: a block of its own, or a tag on an item."""
        return {b.story_id for b in self.blocks} | {s for item in self.items for s in item.sources}

    def item(self, item_id: str) -> Item | None:
        return next((item for item in self.items if item.item_id == item_id), None)


class Tags:
    """The tags of a card's stories: each story's id cut to SHORT hex digits, or longer where two ids
    begin alike, until every story's tag is its own."""

    def __init__(self, stories: Iterable[UUID]) -> None:
        ids = sorted(set(stories), key=lambda s: s.hex)
        self.short: dict[UUID, str] = {}
        for i, story in enumerate(ids):
            length = SHORT
            for other in (ids[i - 1] if i else None, ids[i + 1] if i + 1 < len(ids) else None):
                if other is not None:
                    same = next((n for n, (a, b) in enumerate(zip(story.hex, other.hex, strict=True)) if a != b), 32)
                    length = max(length, same + 1)
            self.short[story] = story.hex[:length]
        self.story = {short: story for story, short in self.short.items()}

    def of(self, story_id: UUID, language: Language) -> str:
        return f"[{TAG_WORD[language]}:{self.short[story_id]}]"

    def find(self, short: str, number: int) -> UUID:
        short = short.lower()
        story = self.story.get(short)
        if story is not None:
            return story
        matching = [s for s in self.short if s.hex.startswith(short)]
        if len(matching) == 1 and len(short) >= SHORT:  # (a longer tag than needed, or the whole id)
            return matching[0]
        if matching:
            raise MemoryTextError(f"line {number}: {short} begins the ids of more than one story of this card")
        raise MemoryTextError(f"line {number}: {short} is no story of this card")


def parse_handbook(text: str, tags: Tags) -> Handbook:
    """The handbook a text holds, its tags read against the card's stories (`tags`)."""
    blocks: list[StoryBlock] = []
    items: list[Item] = []
    block: tuple[UUID, str, list[str]] | None = None
    section: str | None = None

    def close_block() -> None:
        nonlocal block
        if block is not None:
            blocks.append(StoryBlock(block[0], block[1], "\n".join(block[2]).strip()))
            block = None

    for number, line in enumerate(text.splitlines(), 1):
        heading = line.strip()
        if heading.startswith("#"):
            found = _BLOCK.match(heading)
            if found is not None:
                close_block()
                section = None
                story = tags.find(found.group(2), number)
                if any(b.story_id == story for b in blocks):
                    raise MemoryTextError(f"line {number}: a second block of story {story}")
                block = (story, found.group(1), [])
                continue
            section = _SECTION_OF.get(heading.lstrip("#").strip())
            if section is None and block is not None:  # (a line of a story's block that starts with `#`)
                block[2].append(line)
                continue
            close_block()
            if section is None:
                raise MemoryTextError(f"line {number}: an unknown heading {heading[:60]!r}")
            continue
        if block is not None:
            block[2].append(line)
        elif section is not None:
            if not heading:
                continue
            item = _ITEM.match(line)
            if item is None:
                raise MemoryTextError(f"line {number}: a line in a cross-story section that is not an item")
            items.append(_item(section, item.group(1), tags, number))
        elif heading:
            raise MemoryTextError(f"line {number}: text outside any heading")
    close_block()
    return Handbook(tuple(blocks), tuple(items))


def _item(section: str, words: str, tags: Tags, number: int) -> Item:
    found = _TAGS_AT_END.search(words)
    if found is None and _TAG.search(words):
        raise MemoryTextError(f"line {number}: an item's tags go at its end, after its words")
    if found is None:
        raise MemoryTextError(f"line {number}: an item without the tag of the story that supports it")
    sources = tuple(dict.fromkeys(tags.find(s, number) for s in _TAG.findall(found.group(0))))
    text = words[: found.start()].strip()
    if not text or _TAG.search(text):
        raise MemoryTextError(f"line {number}: an item's tags go at its end, after its words")
    return Item(section, text, sources)


def render_handbook(handbook: Handbook, tags: Tags, language: Language) -> str:
    """The handbook as text, in the card's language (parsed back, it is the same handbook)."""
    parts = []
    for block in handbook.blocks:
        title = block.title
        if language == "zh":
            head = f"# {BLOCK_WORD[language]}：{title}（{tags.short[block.story_id]}）"
        else:
            head = f"# {BLOCK_WORD[language]}: {title} ({tags.short[block.story_id]})"
        parts.append(f"{head}\n{block.text}".rstrip())
    for key, name in zip(SECTION_KEYS, SECTIONS[language], strict=True):
        lines = [
            f"- {item.text} {''.join(tags.of(s, language) for s in item.sources)}"
            for item in handbook.items
            if item.section == key
        ]
        if lines:
            parts.append("\n".join([f"# {name}", *lines]))
    return "\n\n".join(parts) + ("\n" if parts else "")


def check_merge(before: Collection[UUID], forgotten: Collection[UUID], after: Handbook) -> None:
    """Refuse a merged handbook that lost a story it was given (`before`: the stories of the last
    handbook and of the recaps merged now) or still names one it was told to forget."""
    lost = sorted(str(s) for s in set(before) - set(forgotten) - after.stories)
    if lost:
        raise MemoryTextError(f"the merge dropped stories it was given: {', '.join(lost)}")
    kept = sorted(str(s) for s in after.stories & set(forgotten))
    if kept:
        raise MemoryTextError(f"the merge kept stories it was told to forget: {', '.join(kept)}")


def forget(handbook: Handbook, story_id: UUID) -> tuple[Handbook, tuple[Item, ...]]:
    """The handbook without `story_id`: its block gone, the items only it supported gone, its tag taken
    off the items others support too; and those items (their words may have mixed what each story said,
    and are worth a rewrite)."""
    items: list[Item] = []
    mixed: list[Item] = []
    for item in handbook.items:
        if story_id not in item.sources:
            items.append(item)
        elif len(item.sources) > 1:
            left = replace(item, sources=tuple(s for s in item.sources if s != story_id))
            items.append(left)
            mixed.append(left)
    blocks = tuple(b for b in handbook.blocks if b.story_id != story_id)
    return Handbook(blocks, tuple(items)), tuple(mixed)


def handbook_data(handbook: Handbook) -> dict[str, Any]:
    """The handbook as an event holds it (JSON: ids as strings)."""
    return {
        "blocks": [{"story_id": str(b.story_id), "title": b.title, "text": b.text} for b in handbook.blocks],
        "items": [
            {"section": i.section, "text": i.text, "sources": [str(s) for s in i.sources]} for i in handbook.items
        ],
    }


def handbook_of(data: Mapping[str, Any]) -> Handbook:
    """The handbook an event holds (`handbook_data`'s inverse)."""
    blocks = tuple(StoryBlock(UUID(b["story_id"]), b["title"], b["text"]) for b in data.get("blocks", ()))
    items = tuple(Item(i["section"], i["text"], tuple(UUID(s) for s in i["sources"])) for i in data.get("items", ()))
    return Handbook(blocks, items)
