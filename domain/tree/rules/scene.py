"""Scene state: the scribe's patches merged by fixed rules and the roster of everything that appeared.
Pure functions (Liyuan §2); how both are rendered into the prompt is `projections/context/scene.py`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

STATE_KEYS = ("time", "location", "characters", "inventory", "flags", "plot_threads")
ROSTER_TABLES = ("characters", "places", "items", "events")
ROSTER_CAPS: Mapping[str, int] = {"characters": 100, "places": 60, "items": 100, "events": 60}
ROSTER_TIME_CHARS = 30
ROSTER_EDIT_CHARS = 60
AFFINITY_MIN, AFFINITY_MAX = -100, 100


@dataclass(frozen=True, slots=True)
class CharacterState:
    """One character as the scene knows them; `at` is where they are now (same naming as the location)."""

    affinity: int = 0
    status: str = ""
    notes: str = ""
    at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"affinity": self.affinity, "status": self.status, "notes": self.notes}
        if self.at is not None:
            out["at"] = self.at
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CharacterState:
        return cls(data.get("affinity", 0), data.get("status", ""), data.get("notes", ""), data.get("at"))


@dataclass(frozen=True, slots=True)
class SceneSnapshot:
    """The world state at one node: the fold of the patches on its path."""

    time: str = ""
    location: str = ""
    characters: Mapping[str, CharacterState] = field(default_factory=dict)
    inventory: tuple[str, ...] = ()
    flags: Mapping[str, str] = field(default_factory=dict)
    plot_threads: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "location": self.location,
            "characters": {name: c.to_dict() for name, c in self.characters.items()},
            "inventory": list(self.inventory),
            "flags": dict(self.flags),
            "plot_threads": list(self.plot_threads),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SceneSnapshot:
        """Defaults overlaid with the stored keys; keys it does not know are ignored."""
        return cls(
            time=data.get("time", ""),
            location=data.get("location", ""),
            characters={name: CharacterState.from_dict(c) for name, c in data.get("characters", {}).items()},
            inventory=tuple(data.get("inventory", ())),
            flags=dict(data.get("flags", {})),
            plot_threads=tuple(data.get("plot_threads", ())),
        )


@dataclass(frozen=True, slots=True)
class Roster:
    """Append-only register: name → in-story time of first appearance, oldest first."""

    characters: Mapping[str, str] = field(default_factory=dict)
    places: Mapping[str, str] = field(default_factory=dict)
    items: Mapping[str, str] = field(default_factory=dict)
    events: Mapping[str, str] = field(default_factory=dict)

    def tables(self) -> dict[str, Mapping[str, str]]:
        return {"characters": self.characters, "places": self.places, "items": self.items, "events": self.events}

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {table: dict(entries) for table, entries in self.tables().items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Roster:
        return cls(**{table: dict(data.get(table, {})) for table in ROSTER_TABLES})


@dataclass(frozen=True, slots=True)
class PatchResult:
    snapshot: SceneSnapshot
    roster: Roster
    applied: list[str]
    warnings: list[str]


@dataclass(slots=True)
class _Draft:
    snapshot: SceneSnapshot
    roster: Roster
    known: tuple[str, ...]
    allow_roster: bool
    applied: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def apply_patch(
    snapshot: SceneSnapshot,
    roster: Roster,
    patch: Mapping[str, object],
    known_names: Iterable[str] = (),
    *,
    allow_roster: bool = False,
) -> PatchResult:
    """Merge a patch by Liyuan's rules, then register what is now on stage. Never raises on JSON input:
    every part it refuses becomes a warning. `allow_roster` is for user edits only."""
    draft = _Draft(snapshot, roster, tuple(known_names), allow_roster)
    if isinstance(patch, Mapping):
        for key, value in patch.items():
            _FIELDS.get(key, _reject_field)(draft, key, value)
    else:
        draft.warnings.append("the patch needs an object; ignored")
    return PatchResult(draft.snapshot, register_roster(draft.snapshot, draft.roster), draft.applied, draft.warnings)


def _replace_text(draft: _Draft, key: str, value: object) -> None:
    if isinstance(value, str):
        draft.snapshot = _replaced(draft.snapshot, key, value)
        draft.applied.append(f"{key} → {value}")
    else:
        draft.warnings.append(f"{key} needs a string; ignored")


def _merge_characters(draft: _Draft, key: str, value: object) -> None:
    if not isinstance(value, Mapping):
        draft.warnings.append("characters needs an object {name: {...} | null}; ignored")
        return
    characters = dict(draft.snapshot.characters)
    known = [*draft.known, *characters, *draft.roster.characters]
    for name, change in canonical_names(value, known).items():
        _merge_character(draft, characters, name, change)
    draft.snapshot = replace(draft.snapshot, characters=characters)


def _merge_character(draft: _Draft, characters: dict[str, CharacterState], name: str, change: object) -> None:
    if not name:
        draft.warnings.append("characters: a character needs a non-empty name; ignored")
    elif change is None:
        if characters.pop(name, None) is not None:
            draft.applied.append(f"characters.{name} removed")
    elif not isinstance(change, Mapping):
        draft.warnings.append(f"characters.{_short(name)} needs an object or null; ignored")
    else:
        characters[name] = _merged_fields(draft, name, characters.get(name, CharacterState()), change)
        draft.applied.append(f"characters.{name} updated")


def _merged_fields(draft: _Draft, name: str, current: CharacterState, change: Mapping[str, object]) -> CharacterState:
    fields: dict[str, Any] = {}
    for key in ("affinity", "status", "notes", "at"):
        if key not in change:
            continue
        value = affinity_of(change[key]) if key == "affinity" else change[key]
        valid = value is not None if key == "affinity" else isinstance(value, str)
        if valid:
            fields[key] = value
        else:
            need = "a finite number" if key == "affinity" else "a string"
            draft.warnings.append(f"characters.{_short(name)}.{key} needs {need}; ignored")
    return replace(current, **fields)


def affinity_of(value: object) -> int | None:
    """A numeric value rounded half up (like JavaScript's Math.round) and clamped; None if not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = math.floor(value + 0.5)
    return max(AFFINITY_MIN, min(AFFINITY_MAX, value))


def _merge_flags(draft: _Draft, key: str, value: object) -> None:
    if not isinstance(value, Mapping):
        draft.warnings.append("flags needs an object {key: string | null}; ignored")
        return
    flags = dict(draft.snapshot.flags)
    for flag, setting in value.items():
        if setting is None:
            if flags.pop(flag, None) is not None:
                draft.applied.append(f"flags.{flag} removed")
        else:
            flags[flag] = setting if isinstance(setting, str) else _json(setting)
            draft.applied.append(f"flags.{flag} → {flags[flag]}")
    draft.snapshot = replace(draft.snapshot, flags=flags)


def _replace_list(draft: _Draft, key: str, value: object) -> None:
    if not isinstance(value, list | tuple):
        draft.warnings.append(f"{key} needs a complete array (the whole list is replaced); ignored")
        return
    kept = tuple(item for item in value if isinstance(item, str))
    dropped = [item for item in value if not isinstance(item, str)]
    if dropped:
        examples = "、".join(_short(_json(item)) for item in dropped[:2])
        draft.warnings.append(
            f"{key}: dropped {len(dropped)} non-string item(s) ({examples}); write each entry as a one-sentence string"
        )
    draft.snapshot = _replaced(draft.snapshot, key, kept)
    draft.applied.append(f"{key} → [{'、'.join(kept)}]")


def _edit_roster(draft: _Draft, key: str, value: object) -> None:
    if not draft.allow_roster:
        draft.warnings.append("roster is edited by the user only; ignored")
        return
    if not isinstance(value, Mapping):
        draft.warnings.append("roster needs an object {table: {name: time | null}}; ignored")
        return
    tables = {table: dict(entries) for table, entries in draft.roster.tables().items()}
    for table, edits in value.items():
        if table not in tables:
            draft.warnings.append(f"roster.{_short(table)}: unknown table; allowed: {', '.join(ROSTER_TABLES)}")
        elif not isinstance(edits, Mapping):
            draft.warnings.append(f"roster.{table} needs an object {{name: time | null}}; ignored")
        else:
            for name, time in edits.items():
                _edit_roster_entry(draft, table, tables[table], name.strip(), time)
    draft.roster = Roster(**{table: _capped(entries, ROSTER_CAPS[table]) for table, entries in tables.items()})


def _edit_roster_entry(draft: _Draft, table: str, entries: dict[str, str], name: str, time: object) -> None:
    if not name:
        draft.warnings.append(f"roster.{table}: an entry needs a non-empty name; ignored")
    elif time is None:
        if entries.pop(name, None) is not None:
            draft.applied.append(f"roster.{table}.{name} removed")
    elif isinstance(time, str):
        entries[name] = time[:ROSTER_EDIT_CHARS]
        draft.applied.append(f"roster.{table}.{name} → {entries[name]}")
    else:
        draft.warnings.append(f"roster.{table}.{_short(name)} needs a string time or null; ignored")


def _reject_field(draft: _Draft, key: str, value: object) -> None:
    allowed = [*STATE_KEYS, "roster"] if draft.allow_roster else STATE_KEYS
    draft.warnings.append(f"unknown field {_short(key)}; allowed: {', '.join(allowed)}")


_FIELDS: Mapping[str, Callable[[_Draft, str, object], None]] = {
    "time": _replace_text,
    "location": _replace_text,
    "characters": _merge_characters,
    "inventory": _replace_list,
    "flags": _merge_flags,
    "plot_threads": _replace_list,
    "roster": _edit_roster,
}


def canonical_names(patch_characters: Mapping[str, object], known: Iterable[str]) -> dict[str, object]:
    """Character keys matched, ignoring case and surrounding spaces, to the first known spelling; keys that
    meet inside one patch are shallow-merged (later fields win)."""
    canon: dict[str, str] = {}
    for name in known:
        if name.strip():
            canon.setdefault(_fold(name), name.strip())
    out: dict[str, object] = {}
    for name, change in patch_characters.items():
        key = canon.setdefault(_fold(name), name.strip())
        earlier = out.get(key)
        if isinstance(earlier, Mapping) and isinstance(change, Mapping):
            change = {**earlier, **change}
        out[key] = change
    return out


def canonical_patch(patch: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The patch with its character keys matched to known spellings (what is stored on the event)."""
    out = dict(patch)
    characters = out.get("characters")
    if isinstance(characters, Mapping):
        out["characters"] = canonical_names(characters, known)
    return out


def register_roster(snapshot: SceneSnapshot, roster: Roster) -> Roster:
    """Add everything now on stage that the roster lacks, at the current in-story time; then apply the caps."""
    seen = {
        "characters": list(snapshot.characters),
        "places": [snapshot.location, *(c.at or "" for c in snapshot.characters.values())],
        "items": list(snapshot.inventory),
        "events": list(snapshot.plot_threads),
    }
    time = snapshot.time[:ROSTER_TIME_CHARS]
    return Roster(
        **{
            table: _capped(_registered(entries, seen[table], time), ROSTER_CAPS[table])
            for table, entries in roster.tables().items()
        }
    )


def _registered(entries: Mapping[str, str], names: Iterable[str], time: str) -> dict[str, str]:
    out = dict(entries)
    for name in names:
        if name.strip() and name not in out:
            out[name] = time
    return out


def _capped(entries: dict[str, str], cap: int) -> dict[str, str]:
    return dict(list(entries.items())[-cap:]) if len(entries) > cap else entries


_FENCE = re.compile(r"```(?:json)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_scribe_output(text: str) -> dict[str, Any] | None:
    """The first JSON object in the scribe's answer (fenced, prefixed or trailed by prose), with `patch`
    forced to an object; None when nothing parses."""
    fenced = _FENCE.search(text)
    found = (_first_object(fenced.group(1)) if fenced else None) or _first_object(text)
    return None if found is None else _with_patch(found)


def _with_patch(found: dict[str, Any]) -> dict[str, Any]:
    patch = found.get("patch")
    return {**found, "patch": patch if isinstance(patch, dict) else {}}


def _first_object(text: str) -> dict[str, Any] | None:
    for start in (i for i, char in enumerate(text) if char == "{"):
        end = _balanced_end(text, start)
        if end is None:
            continue
        try:
            value = json.loads(text[start:end], strict=False)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the `}` closing the `{` at `start`, skipping braces inside strings."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        char = text[i]
        if escaped:
            escaped = False
        elif in_string:
            escaped, in_string = char == "\\", char != '"'
        elif char == '"':
            in_string = True
        elif char in "{}":
            depth += 1 if char == "{" else -1
            if depth == 0:
                return i + 1
    return None


def present(snapshot: SceneSnapshot, name: str) -> bool:
    """Whether the character is where the scene is (the model still judges what they can see)."""
    character = snapshot.characters.get(name) or next(
        (c for n, c in snapshot.characters.items() if _fold(n) == _fold(name)), None
    )
    return character is not None and bool(character.at) and character.at == snapshot.location


def _replaced(snapshot: SceneSnapshot, key: str, value: object) -> SceneSnapshot:
    changes: dict[str, Any] = {key: value}
    return replace(snapshot, **changes)


def _fold(name: str) -> str:
    return name.strip().casefold()


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
