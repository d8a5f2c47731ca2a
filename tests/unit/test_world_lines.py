"""plan_save: world lines follow Liyuan (reference/liyuan.md §1.5)."""

from __future__ import annotations

import pytest

from domain.tree.rules.worldlines import MAIN_LINE
from tests.builders import FakeTree

#   g ─ u1 ─ r1 ─ u2 ─ r2 ─ u3 ─ r3
#               ├ u2b ─ r2b ─ u3b ─ r3b
#               └ u2c ─ r2c
#     └ v1 ─ s1                         (a branch straight off the greeting)
TREE = {
    "g": None, "u1": "g", "r1": "u1", "u2": "r1", "r2": "u2", "u3": "r2", "r3": "u3",
    "u2b": "r1", "r2b": "u2b", "u3b": "r2b", "r3b": "u3b", "u2c": "r1", "r2c": "u2c",
    "v1": "g", "s1": "v1",
}  # fmt: skip
FORK_A_2 = "从「A」分出 · 线2"
FORK_A_3 = "从「A」分出 · 线3"


@pytest.mark.parametrize(
    ("steps", "names"),
    [
        pytest.param([("A", "r1")], [MAIN_LINE], id="first save starts 主线"),
        pytest.param([("A", "r1"), ("B", "r2")], [MAIN_LINE, MAIN_LINE], id="later save extends"),
        pytest.param([("A", "r1"), ("B", "r2"), ("C", "r2b")], [MAIN_LINE, MAIN_LINE, FORK_A_2], id="fork"),
        pytest.param(
            [("A", "r1"), ("B", "r2"), ("C", "r2b"), ("D", "r2c")],
            [MAIN_LINE, MAIN_LINE, FORK_A_2, FORK_A_3],
            id="second fork is 线3",
        ),
        pytest.param(
            [("A", "r1"), ("B", "r2"), ("C", "r2b"), ("D", "r3b")],
            [MAIN_LINE, MAIN_LINE, FORK_A_2, FORK_A_2],
            id="fork line extends",
        ),
        pytest.param([("S", "s1"), ("A", "r1"), ("B", "r2")], [MAIN_LINE] * 3, id="other branch ignored"),
    ],
)
def test_plan_save_names_world_lines(steps: list[tuple[str, str]], names: list[str]) -> None:
    saves = FakeTree(TREE).play(steps)
    assert [s.worldline_name for s in saves] == names


def test_plan_save_extends_the_line_of_the_latest_save_on_the_path() -> None:
    a, b = FakeTree(TREE).play([("A", "r1"), ("B", "r2")])
    assert (b.worldline_id, b.parent_save_id, b.fork_from_save_id) == (a.worldline_id, a.id, None)


def test_plan_save_forks_from_the_save_it_went_back_to() -> None:
    a, _, c = FakeTree(TREE).play([("A", "r1"), ("B", "r2"), ("C", "r2b")])
    assert (c.parent_save_id, c.fork_from_save_id) == (a.id, a.id)
    assert c.worldline_id not in {a.worldline_id}


def test_plan_save_keeps_the_fork_origin_when_a_fork_line_extends() -> None:
    a, _, c, d = FakeTree(TREE).play([("A", "r1"), ("B", "r2"), ("C", "r2b"), ("D", "r3b")])
    assert (d.worldline_id, d.parent_save_id, d.fork_from_save_id) == (c.worldline_id, c.id, a.id)


def test_plan_save_starts_a_separate_main_line_when_no_save_is_on_the_path() -> None:
    s, a = FakeTree(TREE).play([("S", "s1"), ("A", "r1")])
    assert (a.worldline_name, a.parent_save_id) == (MAIN_LINE, None)
    assert a.worldline_id != s.worldline_id
