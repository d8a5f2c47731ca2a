"""Which nodes are on the path to a leaf, as recall asks it: a story's trunk and branches must answer
exactly the ancestors of the leaf, after any sequence of moves (a turn, a regenerate, another client's
branch, a checkout far up), and a turn's move must walk only what was added since."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.values import NodeView
from service.lineages import Lineages

STORY = uuid4()
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Tree:
    def __init__(self) -> None:
        self.nodes: dict[UUID, NodeView] = {}
        self.root = self.add(None)
        self.loads = self.queries = 0

    def add(self, parent: NodeView | None) -> NodeView:
        depth = parent.depth + 1 if parent else 0
        node = NodeView(
            uuid4(), STORY, parent.id if parent else None, "user" if depth % 2 else "reply", depth, depth // 2,
            "", False, False, 0, "sealed", 0, 1, NOW,
        )  # fmt: skip
        self.nodes[node.id] = node
        return node

    def load(self, node_id: UUID) -> NodeView:
        self.loads += 1
        return self.nodes[node_id]

    def ancestry(self, node_id: UUID) -> list[tuple[str, int]] | None:
        """As the read models answer: (id, depth) up to the root, unless the node is among the newest
        (not folded yet)."""
        if node_id in list(self.nodes)[-3:]:
            return None
        self.queries += 1
        out, node = [], self.nodes[node_id]
        while True:
            out.append((str(node.id), node.depth))
            if node.parent_id is None:
                return out
            node = self.nodes[node.parent_id]

    def ancestors(self, leaf: NodeView) -> set[str]:
        out, node = set(), leaf
        while node is not None:
            out.add(str(node.id))
            node = self.nodes[node.parent_id] if node.parent_id else None  # type: ignore[assignment]
        return out


# each step: (which existing node to grow from, as a fraction of the nodes so far; how many nodes to add)
steps = st.lists(st.tuples(st.floats(0, 1), st.integers(0, 40)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps=steps, small=st.booleans(), bulk=st.booleans())
def test_membership_is_exactly_the_path(steps: list[tuple[float, int]], small: bool, bulk: bool) -> None:
    tree = Tree()
    ancestry = tree.ancestry if bulk else None
    paths = Lineages(branches=3, branch_nodes=8, ancestry=ancestry) if small else Lineages(ancestry=ancestry)
    order = [tree.root]
    for where, grow in steps:
        leaf = order[min(int(where * len(order)), len(order) - 1)]
        for _ in range(grow):
            leaf = tree.add(leaf)
            order.append(leaf)
        on_path = paths.at(STORY, leaf, tree.load)
        expected = tree.ancestors(leaf)
        for node in tree.nodes.values():
            assert (str(node.id) in on_path) == (str(node.id) in expected), (node.depth, leaf.depth)


def test_a_turn_on_a_branch_walks_only_what_is_new() -> None:
    """64 clients, each on its own branch off one trunk, taking turns: each move loads a node or two."""
    tree, paths = Tree(), Lineages()
    trunk = tree.root
    for _ in range(3000):
        trunk = tree.add(trunk)
    paths.at(STORY, trunk, tree.load)
    tips = [trunk] * 12
    for _ in range(30):
        for i, tip in enumerate(tips):
            tips[i] = tree.add(tree.add(tip))
            before = tree.loads
            on_path = paths.at(STORY, tips[i], tree.load)
            assert tree.loads - before <= 3, tree.loads - before
            assert str(tips[i].id) in on_path and str(trunk.id) in on_path
            assert all(str(other.id) not in on_path for other in tips if other not in (tips[i], trunk))


def test_a_branch_grown_long_becomes_the_trunk() -> None:
    tree, paths = Tree(), Lineages(branch_nodes=20)
    trunk = tree.root
    for _ in range(50):
        trunk = tree.add(trunk)
    paths.at(STORY, trunk, tree.load)
    side = tree.nodes[trunk.parent_id]  # type: ignore[index]
    for _ in range(25):
        side = tree.add(side)
        on_path = paths.at(STORY, side, tree.load)
    assert str(trunk.id) not in on_path and str(side.id) in on_path
    story = paths._of[STORY]
    assert story.trunk.ids[-1] == str(side.id) and not story.branches


def test_a_story_first_seen_deep_is_read_from_the_read_models_not_node_by_node() -> None:
    tree = Tree()
    leaf = tree.root
    for _ in range(5000):
        leaf = tree.add(leaf)
    paths = Lineages(ancestry=tree.ancestry)
    on_path = paths.at(STORY, leaf, tree.load)
    assert tree.queries == 1 and tree.loads <= 70
    assert str(tree.root.id) in on_path and str(leaf.id) in on_path
