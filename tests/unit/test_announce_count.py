"""The count a finished reply's compaction announcement is decided on equals the count of the
uncovered nodes `uncovered` collects, for any summary boundary and limit."""

from __future__ import annotations

import dataclasses

import pytest

from domain.tree.rules.compaction import count_turns, uncovered, uncovered_turns
from domain.values import Episode
from tests.unit.test_compaction_policy import path


@pytest.mark.parametrize("limit", [0, 1, 5, 36, 200])
@pytest.mark.parametrize("summarized_at", [None, 0, 1, 7, 40, 79])
def test_uncovered_turns_equals_counting_the_uncovered_nodes(limit: int, summarized_at: int | None) -> None:
    nodes = path(40)
    if summarized_at is not None:
        node = nodes[summarized_at]
        episode = Episode("e1", nodes[0].id, None, 0, 0, node.turn, "…", (), "extractive")
        nodes[summarized_at] = dataclasses.replace(node, episode=episode)
    upward = nodes[::-1]
    below, _ = uncovered(upward, limit)
    assert uncovered_turns(upward, limit) == count_turns(below)
