"""The 【剧情记忆】 block: passages recalled from outside the verbatim window, in story order, each
labelled with its turn (and marked when the user hid it) — an episode summary with the turns it covers
— as many as fit the block's token share."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import replace
from uuid import UUID

from domain.texts import ContextTexts
from projections.context.records import TailBlock
from projections.recall.story_index import Hit


def recall_block(
    hits: Sequence[Hit],
    char: str,
    user: str,
    budget: int,
    count: Callable[[str], int],
    fill: Callable[[str, str, str], str],
    texts: ContextTexts,
    lines: MutableMapping[tuple[str, int, str, str, str, bool, str | None], str] | None = None,
    dated: Callable[[str], str | None] | None = None,
    today: str | None = None,
    most: int | None = None,
) -> TailBlock | None:
    """The block for the best hits that fit `budget` tokens (None: none fits, or nothing was recalled); a
    passage of a longer turn brings the whole turn where it fits, else itself, marked as a part. `dated(node
    id)`: the day a recalled turn was said, where it is another than this turn's (`today`, then named in
    the opener); `most`: passages at most (None: as many as fit).
    Its tokens are the opener's and each line's, a token for each line break: the lines recur from turn
    to turn (`count` remembers them), a block of them rarely does; so do the lines themselves, kept in
    `lines` by passage, version, names and language (the caller bounds it)."""
    kept: list[tuple[Hit, str]] = []
    today_note = texts.recall_today.format(date=today) if today is not None and dated is not None else ""
    used = count(texts.recall_opener) + (count(today_note) if today_note else 0)  # (kept for it, used or not)
    wholes: set[str] = set()  # long turns shown whole (another passage of one of them: not again)

    def line_of(hit: Hit, part: bool) -> str:
        date = dated(str(hit.row["node_id"])) if dated is not None and not hit.episode else None
        key = (str(hit.row["id"]), int(hit.row["seq"]), char, user, texts.language, part, date)
        line = lines.get(key) if lines is not None else None
        if line is None:
            line = recall_line(hit, char, user, fill, texts, part, date)
            if lines is not None:
                lines[key] = line
        return line

    for hit in hits:  # best first: the least relevant are the ones left out
        if most is not None and len(kept) >= most:
            break
        if hit.whole is not None and hit.row["node_id"] in wholes:
            continue
        merged = replace(hit, row=hit.whole) if hit.whole is not None else None
        whole = line_of(merged, False) if merged is not None else None
        line = whole if whole is not None and used + count(whole) + 1 <= budget else line_of(hit, merged is not None)
        tokens = count(line) + 1
        if used + tokens > budget:
            break
        if merged is not None and line is whole:
            kept.append((merged, line))
            wholes.add(hit.row["node_id"])
        else:
            kept.append((hit, line))
        used += tokens
    if not kept:
        return None
    kept.sort(key=lambda item: item[0].story_order)
    opener = texts.recall_opener
    if today_note and dated is not None and any(dated(str(h.row["node_id"])) for h, _ in kept if not h.episode):
        opener += today_note
    text = opener + "\n" + "\n".join(line for _, line in kept)
    found = sorted({name for hit, _ in kept for name in hit.found_by})
    why = f"recalled for the user's words: {len(kept)} of {len(hits)} passages ({' + '.join(found)}), fused scores"
    node_ids = tuple(UUID(hit.row["node_id"]) for hit, _ in kept)
    return TailBlock("recall", why, text, node_ids, tuple(round(hit.score, 4) for hit, _ in kept), used)


def recall_line(
    hit: Hit,
    char: str,
    user: str,
    fill: Callable[[str, str, str], str],
    texts: ContextTexts,
    part: bool = False,
    date: str | None = None,
) -> str:
    """A recalled passage as the model reads it: its turn (or an episode's turns), who said what; `part`:
    a part of a longer turn, marked so (…); `date`: the day it was said, where shown."""
    row = hit.row
    if hit.episode:
        summary = fill(str(row["text"]).strip(), char, user)
        return texts.recall_summary_line.format(first=row["first_turn"], last=row["turn"], text=summary)
    text, split = str(row["text"]), int(row["user_part"])
    words, reply = text[:split].strip(), text[split:].strip()
    parts = [texts.speech(user, fill(words, char, user))] if words else []
    if reply:
        parts.append(texts.speech(char, fill(reply, char, user)))
    hidden = (texts.recall_hidden if hit.hidden else "") + (texts.recall_date.format(date=date) if date else "")
    said = " ".join(parts)
    return texts.recall_turn_line.format(turn=row["turn"], hidden=hidden, parts=f"…{said}…" if part else said)
