"""Lorebook values: entries in changji's own form (what World Info files, a card's `character_book` and the
model's `lorebook_write` all become), a book's scan settings, the books activation reads and what it found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SelectiveLogic = Literal["and_any", "not_all", "not_any", "and_all"]
LorePosition = Literal["before_char", "after_char"]
LoreBookKind = Literal["embedded", "world_info", "supplement"]


class LoreEntry(BaseModel):
    """One entry. `uid` is unique within its book. Fields other systems have and changji does not use are
    kept verbatim in `extensions` (so an export gives them back)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uid: int = Field(ge=0, le=2**53)
    keys: tuple[str, ...] = Field((), max_length=200)
    secondary_keys: tuple[str, ...] = Field((), max_length=200)
    title: str = Field("", max_length=500, description="the comment or name; the first key when empty")
    content: str = Field("", max_length=100_000)
    constant: bool = False
    enabled: bool = True
    selective: bool = True
    logic: SelectiveLogic = "and_any"
    order: int = Field(100, ge=-(2**31), le=2**31, description="lower is inserted first (higher in the prompt)")
    position: LorePosition = "before_char"
    case_sensitive: bool | None = Field(None, description="None: the book's setting")
    whole_words: bool | None = Field(None, description="None: the book's setting")
    use_regex: bool = Field(False, description="every key is a regular expression (V3 `use_regex`)")
    scan_depth: int | None = Field(None, ge=0, le=1000, description="None: the book's setting")
    extensions: dict[str, Any] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.title or (self.keys[0] if self.keys else f"#{self.uid}")


class LoreScan(BaseModel):
    """How a book's entries are matched; an entry's own setting, where it has one, wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scan_depth: int = Field(4, ge=0, le=1000, description="the newest messages of the path scanned for keys")
    case_sensitive: bool = False
    whole_words: bool = True
    max_hits: int = Field(
        3, ge=0, le=100, description="read from lorebooks written before activation had a token budget; not used"
    )
    recursive: bool = Field(False, description="hit entries' content scanned again for more keys")
    max_recursion: int = Field(3, ge=0, le=20)


LeftOut = Literal["budget", "probability", "group", "delay", "cooldown"]


@dataclass(frozen=True, slots=True)
class LoreHit:
    """An entry whose keys fired (or a constant), and what became of it: kept, or `left_out` and why. `roll`:
    its probability draw (0–100; None: it had no chance to fail); `group`: the inclusion group it lost."""

    book_id: str
    entry: LoreEntry
    key: str | None
    secondary: str | None = None
    recursion: int = 0
    left_out: LeftOut | None = None
    roll: float | None = None
    group: str | None = None
    sticky: bool = False  # in by a sticky timer, keys or not

    @property
    def why(self) -> str:
        if self.sticky:
            return "sticky"
        if self.key is None:
            return "constant"
        return f"key {self.key!r}" + (f" with {self.secondary!r}" if self.secondary else "")

    @property
    def why_not(self) -> str:
        """Why a hit was left out ("" when it was kept)."""
        extras = extras_of(self.entry)
        if self.left_out == "probability":
            return f"probability: drew {self.roll:.1f} over {extras.probability}"
        if self.left_out == "group":
            return f"group {self.group!r}: another entry won"
        if self.left_out == "delay":
            return f"delay: the chat has fewer than {extras.delay} messages"
        if self.left_out == "cooldown":
            return f"cooldown: {extras.cooldown} messages after it was last in"
        return "budget: no room left" if self.left_out == "budget" else ""


@dataclass(frozen=True, slots=True)
class LoreExtras:
    """What SillyTavern's World Info fields beyond the card spec say of an entry, read from its `extensions`
    under either spelling (a World Info file's `useProbability`, a card book's `use_probability`…), each with
    SillyTavern's default when absent or of the wrong type."""

    probability: float = 100.0
    use_probability: bool = True
    groups: tuple[str, ...] = ()
    group_override: bool = False
    group_weight: float = 100.0
    group_scoring: bool = False
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: int = 0  # 0: any pass; n: only from the n-th recursion pass on
    delay: int = 0
    sticky: int = 0
    cooldown: int = 0
    placement: int = -1  # SillyTavern's position number where the entry has one (-1: none, read `position`)
    depth: int = 4
    role: int = 0  # 0 system, 1 user, 2 assistant

    @property
    def at_depth(self) -> tuple[int, Role] | None:
        """Where an entry placed in the chat goes: (messages from the end, role), for SillyTavern's @depth
        (4) and its author's note top and bottom (2, 3: where the note goes, 4 messages up, as a system
        text); None for the other positions."""
        if self.placement == 4:
            return self.depth, ROLES[self.role] if 0 <= self.role < len(ROLES) else "system"
        return (AUTHORS_NOTE_DEPTH, "system") if self.placement in (2, 3) else None

    @property
    def chance(self) -> float:
        """The percentage it activates with once its keys fire (100: it cannot fail)."""
        return self.probability if self.use_probability else 100.0


NO_EXTRAS = LoreExtras()
Role = Literal["system", "user", "assistant"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant")
AUTHORS_NOTE_DEPTH = 4
WI_TO_CARD_EXT = {  # SillyTavern's World Info field names, and what a card book's `extensions` calls them
    "excludeRecursion": "exclude_recursion",
    "preventRecursion": "prevent_recursion",
    "delayUntilRecursion": "delay_until_recursion",
    "displayIndex": "display_index",
    "groupOverride": "group_override",
    "groupWeight": "group_weight",
    "useGroupScoring": "use_group_scoring",
    "automationId": "automation_id",
    **{name: name for name in ("probability", "useProbability", "depth", "group", "role", "vectorized")},
    **{name: name for name in ("sticky", "cooldown", "delay")},
}
_WORLD_INFO_NAMES = {  # LoreExtras field: its World Info name (a card book's: `WI_TO_CARD_EXT`, else the same)
    "probability": "probability",
    "use_probability": "useProbability",
    "groups": "group",
    "group_override": "groupOverride",
    "group_weight": "groupWeight",
    "group_scoring": "useGroupScoring",
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "delay_until_recursion": "delayUntilRecursion",
    "delay": "delay",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "placement": "position",
    "depth": "depth",
    "role": "role",
}
_SPELLINGS = {field: (wi, WI_TO_CARD_EXT.get(wi, wi)) for field, wi in _WORLD_INFO_NAMES.items()}


def extras_of(entry: LoreEntry) -> LoreExtras:
    """The entry's World Info extras (NO_EXTRAS when its extensions name none)."""
    ext = entry.extensions
    if not ext:
        return NO_EXTRAS
    found: dict[str, Any] = {}
    for name, spellings in _SPELLINGS.items():
        value = next((ext[s] for s in spellings if ext.get(s) is not None), None)
        if value is not None:
            found[name] = value
    if not found:
        return NO_EXTRAS
    return LoreExtras(
        probability=_number(found.get("probability"), 100.0, 0.0, 100.0),
        use_probability=_flag(found.get("use_probability"), True),
        groups=tuple(g for g in (p.strip() for p in str(found.get("groups") or "").split(",")) if g),
        group_override=_flag(found.get("group_override"), False),
        group_weight=_number(found.get("group_weight"), 100.0, 0.0, 1e9),
        group_scoring=_flag(found.get("group_scoring"), False),
        exclude_recursion=_flag(found.get("exclude_recursion"), False),
        prevent_recursion=_flag(found.get("prevent_recursion"), False),
        delay_until_recursion=_level(found.get("delay_until_recursion")),
        delay=int(_number(found.get("delay"), 0.0, 0.0, 1e9)),
        sticky=int(_number(found.get("sticky"), 0.0, 0.0, 1e9)),
        cooldown=int(_number(found.get("cooldown"), 0.0, 0.0, 1e9)),
        placement=int(_number(found.get("placement"), -1.0, -1.0, 100.0)),
        depth=int(_number(found.get("depth"), 4.0, 0.0, 1000.0)),
        role=int(_number(found.get("role"), 0.0, 0.0, 2.0)),
    )


def _level(value: Any) -> int:
    """`delayUntilRecursion`: true is the first recursion pass, a number the pass it waits for."""
    return int(value) if isinstance(value, bool) else int(_number(value, 0.0, 0.0, 100.0))


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _number(value: Any, default: float, low: float, high: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:  # (not NaN)
        return min(max(float(value), low), high)
    return default


@dataclass(frozen=True, slots=True)
class LoreBookView:
    """One book as activation and search see it: its entries in the book's order and its scan settings."""

    book_id: str
    scan: LoreScan
    entries: Sequence[LoreEntry]
    excluded: frozenset[int] = frozenset()  # uids that take no part here (the same entries, seen from elsewhere)


@dataclass(frozen=True, slots=True)
class LoreActivation:
    """What one turn's activation chose: constant entries (by order), the keyword hits kept (in prompt order),
    the hits left out (each with why: the budget, its probability, its inclusion group, its delay), and the
    regex keys that ran out of time."""

    constants: tuple[LoreHit, ...]
    hits: tuple[LoreHit, ...]
    left_out: tuple[LoreHit, ...]
    timed_out: tuple[tuple[str, int, str], ...]
    tokens: int = 0  # what the kept entries cost (the constants too, where they were charged)

    @property
    def not_kept(self) -> int:
        return len(self.left_out)
