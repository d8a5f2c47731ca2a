"""The 【剧情记忆】 block: passages recalled from outside the verbatim window, in story order, each
labelled with its turn (and marked when the user hid it) — an episode summary with the turns it covers
— as many as fit the block's token share."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from uuid import UUID

from projections.context.records import TailBlock
from projections.recall.story_index import Hit

OPENER = "【剧情记忆】与本轮有关的早前片段（按剧情先后，仅供回忆，不是新发生的事）："


def recall_block(
    hits: Sequence[Hit],
    char: str,
    user: str,
    budget: int,
    count: Callable[[str], int],
    fill: Callable[[str, str, str], str],
    lines: MutableMapping[tuple[str, int, str, str], str] | None = None,
) -> TailBlock | None:
    """The block for the best hits that fit `budget` tokens (None: none fits, or nothing was recalled).
    Its tokens are the opener's and each line's, a token for each line break: the lines recur from turn
    to turn (`count` remembers them), a block of them rarely does; so do the lines themselves, kept in
    `lines` by passage, version and names (the caller bounds it)."""
    kept: list[tuple[Hit, str]] = []
    used = count(OPENER)
    for hit in hits:  # best first: the least relevant are the ones left out
        key = (str(hit.row["id"]), int(hit.row["seq"]), char, user)
        line = lines.get(key) if lines is not None else None
        if line is None:
            line = recall_line(hit, char, user, fill)
            if lines is not None:
                lines[key] = line
        tokens = count(line) + 1
        if used + tokens > budget:
            break
        kept.append((hit, line))
        used += tokens
    if not kept:
        return None
    kept.sort(key=lambda item: item[0].story_order)
    text = OPENER + "\n" + "\n".join(line for _, line in kept)
    found = sorted({name for hit, _ in kept for name in hit.found_by})
    why = f"recalled for the user's words: {len(kept)} of {len(hits)} passages ({' + '.join(found)}), fused scores"
    node_ids = tuple(UUID(hit.row["node_id"]) for hit, _ in kept)
    return TailBlock("recall", why, text, node_ids, tuple(round(hit.score, 4) for hit, _ in kept), used)


def recall_line(hit: Hit, char: str, user: str, fill: Callable[[str, str, str], str]) -> str:
    """A recalled passage as the model reads it: its turn (or an episode's turns), who said what."""
    row = hit.row
    if hit.episode:
        return f"- 第{row['first_turn']}–{row['turn']}轮（摘要） {fill(str(row['text']).strip(), char, user)}"
    text, split = str(row["text"]), int(row["user_part"])
    words, reply = text[:split].strip(), text[split:].strip()
    parts = [f"{user}：{fill(words, char, user)}"] if words else []
    if reply:
        parts.append(f"{char}：{fill(reply, char, user)}")
    hidden = "（已隐藏）" if hit.hidden else ""
    return f"- 第{row['turn']}轮{hidden} " + " ".join(parts)
