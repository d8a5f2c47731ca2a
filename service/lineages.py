"""Which nodes are on the path to a leaf: what recall asks of every passage it considers.

Each story keeps one `Lineage`, its trunk: the path root→tip as node ids by depth. A leaf below the
trunk's tip moves the trunk down (a step or two per turn). A leaf that left the trunk higher up — a
regenerate, a branch, or another client playing its own branch of the same story — gets a `Branch`:
the ids from the leaf up to the fork with the trunk, remembered by its tip, so the next turn on that
branch walks only the nodes added since. A branch that grows past `BRANCH_NODES` becomes the trunk
(the trunk moves there by walking up to the fork, once). Every move costs the nodes walked since the
last one, never the story's length.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Container
from uuid import UUID

from domain.values import NodeView

Load = Callable[[UUID], NodeView]
Ancestry = Callable[[UUID], "list[tuple[str, int]] | None"]  # (id, depth) up to the root, leaf first; None: unknown
OnPath = Container[object]  # `node_id in it`: whether the node (its id as a string) is on the path
BRANCHES = 64  # branches kept per story (the least recently used goes first)
BRANCH_NODES = 2048  # a branch longer than this becomes the story's trunk
STORIES = 256  # stories whose trunks are kept
FAR = 64  # nodes walked up one by one before the rest of a path is asked of the read models


class Lineage:
    """One path root→tip, as node ids by depth: moved to another leaf by walking up from it only as far
    as the fork (the next turn: a step or two; a branch switch: to the branch point)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.depth_of: dict[str, int] = {}

    def fork(self, leaf: NodeView, load: Load, limit: int | None = None) -> tuple[list[NodeView], NodeView | None]:
        """The nodes from `leaf` up to (not including) the first that is on this path, and that node
        (None: the root was passed, or `limit` nodes were walked first)."""
        chain: list[NodeView] = []
        node: NodeView | None = leaf
        while node is not None and self.depth_of.get(str(node.id)) != node.depth:
            if limit is not None and len(chain) >= limit:
                return chain, None
            chain.append(node)
            node = load(node.parent_id) if node.parent_id is not None else None
        return chain, node

    def move_to(self, leaf: NodeView, load: Load, ancestry: Ancestry | None = None) -> None:
        chain, fork = self.fork(leaf, load, FAR if ancestry is not None else None)
        if fork is None and ancestry is not None and chain and chain[-1].parent_id is not None:
            above = ancestry(chain[-1].parent_id)
            if above is not None:  # the rest of the path in one query
                self.ids = [node_id for node_id, _ in reversed(above)] + [str(n.id) for n in reversed(chain)]
                self.depth_of = {node_id: depth for node_id, depth in above}
                self.depth_of.update((str(n.id), n.depth) for n in chain)
                return
            chain, fork = self.fork(leaf, load)  # not folded yet: node by node
        self._replace(chain, fork.depth + 1 if fork is not None else 0)

    def _replace(self, chain: list[NodeView], keep: int) -> None:
        for gone in self.ids[keep:]:
            del self.depth_of[gone]
        del self.ids[keep:]
        for step in reversed(chain):
            self.ids.append(str(step.id))
            self.depth_of[self.ids[-1]] = step.depth

    @property
    def tip_depth(self) -> int:
        return len(self.ids) - 1

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.depth_of


class Branch:
    """A path that leaves a trunk at depth `fork_depth`: the trunk's nodes down to there, then its own."""

    def __init__(self, trunk: Lineage, fork_depth: int, own: dict[str, int], tip: NodeView) -> None:
        self.trunk, self.fork_depth, self.own, self.tip = trunk, fork_depth, own, tip

    def __contains__(self, node_id: object) -> bool:
        if node_id in self.own:
            return True
        depth = self.trunk.depth_of.get(node_id)  # type: ignore[call-overload]
        return depth is not None and depth <= self.fork_depth


class StoryLineage:
    """A story's trunk and its recent branches, by tip."""

    def __init__(
        self, branches: int = BRANCHES, branch_nodes: int = BRANCH_NODES, ancestry: Ancestry | None = None
    ) -> None:
        self.trunk, self.ancestry = Lineage(), ancestry
        self.branches: OrderedDict[UUID, Branch] = OrderedDict()
        self.most, self.longest = branches, branch_nodes

    def at(self, leaf: NodeView, load: Load) -> Lineage | Branch | Prefix:
        """The path to `leaf`, moving the trunk or a branch there: one walk up from the leaf, to the
        first node that is a remembered branch's tip or on the trunk."""
        trunk = self.trunk
        if not trunk.ids:  # the story's first: the whole path
            return self._move_trunk(leaf, load)
        chain: list[NodeView] = []
        node: NodeView | None = leaf
        while node is not None and len(chain) <= self.longest:
            if trunk.depth_of.get(str(node.id)) == node.depth:  # the fork with the trunk
                if node.depth == trunk.tip_depth:  # at or below the tip: the trunk grows (branches stay)
                    trunk._replace(chain, node.depth + 1)
                    return trunk
                if not chain:  # a node of the trunk itself
                    return Prefix(trunk, node.depth)
                branch = Branch(trunk, node.depth, {str(n.id): n.depth for n in chain}, leaf)
                break
            base = self.branches.pop(node.id, None)
            if base is not None:  # a remembered branch's tip: the leaf's branch extends it
                for step in chain:
                    base.own[str(step.id)] = step.depth
                branch = Branch(trunk, base.fork_depth, base.own, leaf)
                break
            chain.append(node)
            node = load(node.parent_id) if node.parent_id is not None else None
        else:  # a new trunk, or a branch too long to keep apart: the trunk moves there
            return self._move_trunk(leaf, load)
        if len(branch.own) > self.longest:
            return self._move_trunk(leaf, load)
        self.branches[leaf.id] = branch
        while len(self.branches) > self.most:
            self.branches.popitem(last=False)
        return branch

    def _move_trunk(self, leaf: NodeView, load: Load) -> Lineage:
        """The trunk moved to `leaf` by walking up to where it forks; the branches named the trunk as it
        was, so they go."""
        self.trunk.move_to(leaf, load, self.ancestry)
        self.branches.clear()
        return self.trunk


class Prefix:
    """A trunk read only down to `depth` (a leaf above the trunk's tip)."""

    def __init__(self, trunk: Lineage, depth: int) -> None:
        self.trunk, self.depth = trunk, depth

    def __contains__(self, node_id: object) -> bool:
        depth = self.trunk.depth_of.get(node_id)  # type: ignore[call-overload]
        return depth is not None and depth <= self.depth


def head(path: Lineage | Branch | Prefix, depth: int) -> list[str]:
    """The ids of a path's first nodes, root first, down to `depth` (what a path known by its lineage
    holds there, without a walk)."""
    if isinstance(path, Prefix):
        return path.trunk.ids[: min(path.depth, depth) + 1]
    if isinstance(path, Branch):
        own = sorted((d, node_id) for node_id, d in path.own.items() if d <= depth)
        return path.trunk.ids[: min(path.fork_depth, depth) + 1] + [node_id for _, node_id in own]
    return path.ids[: depth + 1]


class Lineages:
    """The trunks and branches of the most recently used stories."""

    def __init__(
        self,
        stories: int = STORIES,
        branches: int = BRANCHES,
        branch_nodes: int = BRANCH_NODES,
        ancestry: Ancestry | None = None,
    ) -> None:
        self.stories, self.branches, self.branch_nodes, self.ancestry = stories, branches, branch_nodes, ancestry
        self._of: OrderedDict[UUID, StoryLineage] = OrderedDict()

    def at(self, story_id: UUID, leaf: NodeView, load: Load) -> Lineage | Branch | Prefix:
        story = self._of.pop(story_id, None) or StoryLineage(self.branches, self.branch_nodes, self.ancestry)
        self._of[story_id] = story
        if len(self._of) > self.stories:
            self._of.popitem(last=False)
        return story.at(leaf, load)
