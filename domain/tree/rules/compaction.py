"""Compaction policy (pure): when a pack of turns is due, which nodes it covers, how a path's summary
layers chain together, and when episodes fold into the digest.

Layers of a path, oldest first, disjoint and contiguous: the digest (root … the node it annotates), then
episodes (each exactly one pack, annotating its last node and pointing at the node before its first),
then the verbatim window. Walking up from a leaf, the first node that carries a summary is the
boundary: everything above it is covered by summaries, everything below it is word for word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from uuid import UUID

from domain.values import Digest, Episode, NodeView, StorySettings

MANUAL_MIN_CHARS = 500
SUMMARY_SHARE_CHARS_PER_TOKEN = 0.5  # the summary layers' room in characters, per token of the prompt budget


def summary_chars(settings: StorySettings) -> int:
    """How many characters a path's summary layers may hold together: about a third of the prompt
    budget in tokens for Chinese text (a character is ~0.6 token), so a small budget keeps room for
    the turns themselves."""
    budget = max(settings.context_window - settings.reply_reserve, 0)
    return max(200, int(budget * SUMMARY_SHARE_CHARS_PER_TOKEN))


LOOKAHEAD_PACKS = 4  # a lagging compaction is re-announced at most this many packs past due


@dataclass(frozen=True, slots=True)
class Layers:
    """The summary layers above a boundary: the digest (with the node it annotates) and the episodes
    after it, oldest first."""

    digest: tuple[NodeView, Digest] | None
    episodes: tuple[tuple[NodeView, Episode], ...]

    @property
    def covered_turn(self) -> int:
        """The last turn the summaries cover (0: none)."""
        if self.episodes:
            return self.episodes[-1][1].last_turn
        return self.digest[1].last_turn if self.digest else 0

    @property
    def covered_depth(self) -> int:
        """The depth of the last covered node (−1: nothing covered)."""
        if self.episodes:
            return self.episodes[-1][0].depth
        return self.digest[0].depth if self.digest else -1


NO_LAYERS = Layers(None, ())


def summary_of(node: NodeView) -> bool:
    return node.episode is not None or node.digest is not None


def layers_from(boundary: NodeView | None, load: Callable[[UUID], NodeView]) -> Layers:
    """Follow the chain from the boundary: a digest ends it; an episode leads to the node before its
    first covered node, which carries the previous episode or the digest (or is the root's parent)."""
    episodes: list[tuple[NodeView, Episode]] = []
    node = boundary
    while node is not None:
        if node.digest is not None:
            return Layers((node, node.digest), tuple(reversed(episodes)))
        if node.episode is None:
            break  # cannot happen for packs planned here; a hand-made gap ends the chain
        episodes.append((node, node.episode))
        node = load(node.episode.after_id) if node.episode.after_id is not None else None
    return Layers(None, tuple(reversed(episodes)))


def digest_opened(holder: NodeView, load: Callable[[UUID], NodeView]) -> Layers:
    """What a digest stands for: the previous digest and the episodes it absorbed, which stay on their
    nodes (the digest's own node carries the last of them). The same layers if they cannot be followed."""
    assert holder.digest is not None
    episodes: list[tuple[NodeView, Episode]] = []
    node: NodeView | None = holder
    while node is not None and node.episode is not None and (node is holder or node.digest is None):
        episodes.append((node, node.episode))
        node = load(node.episode.after_id) if node.episode.after_id is not None else None
    if not episodes or len(episodes) < len(holder.digest.absorbed):
        return Layers((holder, holder.digest), ())
    previous = (node, node.digest) if node is not None and node.digest is not None else None
    return Layers(previous, tuple(reversed(episodes)))


def uncovered(upward: Iterable[NodeView], limit: int | None = None) -> tuple[list[NodeView], NodeView | None]:
    """The nodes below the boundary (root→leaf order) and the boundary itself (None: nothing covered).
    With `limit`, stops after that many user nodes (enough to know a pack is due)."""
    below: list[NodeView] = []
    users = 0
    for node in upward:
        if summary_of(node):
            below.reverse()
            return below, node
        below.append(node)
        users += node.kind == "user"
        if limit is not None and users > limit:
            break
    below.reverse()
    return below, None


@dataclass(frozen=True, slots=True)
class PackPlan:
    """The nodes one episode will cover (root→leaf order) and what it needs to know about them."""

    nodes: tuple[NodeView, ...]
    after_id: UUID | None
    first_turn: int
    last_turn: int
    chars: int

    @property
    def end(self) -> NodeView:
        return self.nodes[-1]

    @property
    def anchors(self) -> tuple[UUID, ...]:
        return tuple(n.id for n in self.nodes if n.starred and not n.hidden)


def _turns(nodes: Sequence[NodeView]) -> list[list[NodeView]]:
    """Nodes grouped into turns: each turn starts at a user node; a greeting opens a group of its own."""
    groups: list[list[NodeView]] = []
    for node in nodes:
        if node.kind in ("user", "greeting") or not groups:
            groups.append([node])
        else:
            groups[-1].append(node)
    return groups


def uncovered_turns(upward: Iterable[NodeView], limit: int) -> int:
    """The user nodes on a path (read leaf→root) below its summary boundary, counted up to `limit` + 1:
    `count_turns(uncovered(upward, limit)[0])` without building the list."""
    users = 0
    for node in upward:
        if node.episode is not None or node.digest is not None:
            break
        if node.kind == "user":
            users += 1
            if users > limit:
                break
    return users


def count_turns(nodes: Sequence[NodeView]) -> int:
    return sum(node.kind == "user" for node in nodes)


def plan_pack(nodes: Sequence[NodeView], settings: StorySettings, manual: bool = False) -> PackPlan | None:
    """The next pack on a path whose uncovered nodes are `nodes` (root→leaf order).

    Automatic: due when the uncovered turns reach keep_turns + pack_turns; it covers the oldest
    pack_turns turns (a greeting before them rides along), extended turn by turn while the covered text
    is under min_pack_chars, never into the last keep_turns. Manual: everything but the last keep_turns,
    from 500 characters. None when nothing is due."""
    groups = _turns(nodes)
    lead = groups[:1] if groups and groups[0][0].kind != "user" else []
    turns = groups[len(lead) :]
    keep = settings.keep_turns
    if manual:
        take, floor = len(turns) - keep, MANUAL_MIN_CHARS
    elif settings.pack_turns == 0 or len(turns) < keep + settings.pack_turns:
        return None
    else:
        take, floor = settings.pack_turns, settings.min_pack_chars
    if take <= 0:
        return None
    chars = _chars([n for g in [*lead, *turns[:take]] for n in g])
    while chars < floor and take < len(turns) - keep:
        chars += _chars(turns[take])
        take += 1
    if chars < floor or turns[take - 1][-1].kind != "reply":
        return None
    covered = tuple(n for g in [*lead, *turns[:take]] for n in g)
    return PackPlan(covered, covered[0].parent_id, covered[0].turn, turns[take - 1][0].turn, chars)


def _chars(nodes: Iterable[NodeView]) -> int:
    return sum(len(n.text) for n in nodes if not n.hidden)


def announce(uncovered_turns: int, settings: StorySettings) -> bool:
    """Whether a reply that brings its path to `uncovered_turns` announces a compaction: when the path
    first becomes due, then again every pack_turns while it stays uncovered (a lagging job)."""
    if settings.pack_turns == 0:
        return False
    due = settings.keep_turns + settings.pack_turns
    past = uncovered_turns - due
    return past >= 0 and past % settings.pack_turns == 0 and past <= LOOKAHEAD_PACKS * settings.pack_turns


def announce_limit(settings: StorySettings) -> int:
    """How many user nodes to count at most when deciding `announce`."""
    return settings.keep_turns + (LOOKAHEAD_PACKS + 1) * settings.pack_turns


def episodes_to_fold(layers: Layers, settings: StorySettings) -> tuple[tuple[NodeView, Episode], ...]:
    """The oldest episodes beyond episodes_kept, which fold into the digest."""
    extra = len(layers.episodes) - settings.episodes_kept
    return layers.episodes[:extra] if extra > 0 else ()
