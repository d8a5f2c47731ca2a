"""The scene read model (invariant 2): the scene at a node is the fold of the patches on its path in
path order, whatever order the patches arrive in, however the log is cut into batches; a rebuild
from position 0 gives the same tables."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.application import Changji
from domain.tree.commands.jobs import SideCall
from domain.tree.rules.scene import Roster, SceneSnapshot, apply_patch
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder, memory_app

NAMES = ["沈砚", "老周", "Ann", " ann"]  # the last two meet under one spelling
patches = st.fixed_dictionaries(
    {},
    optional={
        "time": st.sampled_from(["第一夜", "第二天", "黄昏"]),
        "location": st.sampled_from(["灯塔", "码头", "北屿"]),
        "characters": st.dictionaries(
            st.sampled_from(NAMES),
            st.none()
            | st.fixed_dictionaries(
                {},
                optional={
                    "affinity": st.integers(-120, 120),
                    "status": st.sampled_from(["醒着", "睡了"]),
                    "at": st.sampled_from(["灯塔", "码头"]),
                },
            ),
            max_size=2,
        ),
        "inventory": st.lists(st.sampled_from(["船票", "怀表", "油灯"]), max_size=2),
        "flags": st.dictionaries(
            st.sampled_from(["雨", "誓言"]), st.none() | st.sampled_from(["有", "无"]), max_size=2
        ),
    },
)


@st.composite
def plays(draw: st.DrawFn) -> dict[str, Any]:
    """A tree (each new turn hangs under a random earlier reply or the greeting), patches on random
    nodes, and an order in which patches and later nodes arrive interleaved."""
    turns = draw(st.integers(1, 7))
    under = [draw(st.integers(0, i)) for i in range(turns)]  # 0: the greeting; i: the reply of turn i
    count = draw(st.integers(0, 10))
    targets = [draw(st.integers(0, 2 * turns)) for _ in range(count)]  # 0: greeting; odd: user; even: reply
    return {
        "under": under,
        "patches": [(t, draw(patches), draw(st.booleans())) for t in targets],
        "seed": draw(st.integers(0, 2**32)),
        "batches": draw(st.integers(1, 40)),
    }


def played(app: Changji, play: dict[str, Any]) -> tuple[StoryBuilder, list[UUID], list[tuple[UUID, dict[str, Any]]]]:
    """Perform the play in a random order that respects causality; return the nodes (index 0 the
    greeting, then user/reply per turn) and each patch with the node it was recorded on, in log order."""
    story = StoryBuilder.start(app)
    nodes: list[UUID | None] = [story.root_id] + [None] * (2 * len(play["under"]))
    pending: list[tuple[str, Any]] = [("turn", i) for i in range(len(play["under"]))]
    pending += [("patch", p) for p in play["patches"]]
    rng = random.Random(play["seed"])
    rng.shuffle(pending)
    recorded: list[tuple[UUID, dict[str, Any]]] = []
    scribed: set[UUID] = set()
    while pending:
        for index, (kind, item) in enumerate(pending):
            if kind == "turn":
                parent = nodes[2 * play["under"][item]]
                if parent is None:
                    continue
                user, reply = story.turn(f"第{item}问", f"第{item}答", parent=parent)
                nodes[2 * item + 1], nodes[2 * item + 2] = user, reply
            else:
                target, patch, by_scribe = item
                node = nodes[target]
                if node is None:
                    continue
                if by_scribe and target and target % 2 == 0 and node not in scribed:
                    scribed.add(node)
                    app.scenes.record_scribe_patch(node, patch, [], SideCall("scribe", "m", 1, 1, 1.0, "ok"))
                else:
                    app.scenes.record_scene_edit(story.tenant, story.story_id, node, patch, [])
                recorded.append((node, patch))
            del pending[index]
            break
    return story, [n for n in nodes if n is not None], recorded


def folded(
    app: Changji, node: UUID, recorded: list[tuple[UUID, dict[str, Any]]]
) -> tuple[SceneSnapshot, Roster] | None:
    """The reference: walk the path root → node and apply each node's patches in their recorded order."""
    path: list[UUID] = []
    current: UUID | None = node
    while current is not None:
        path.append(current)
        current = app.node(current).parent_id
    snapshot, roster, any_patch = SceneSnapshot(), Roster(), False
    for step in reversed(path):
        for target, patch in recorded:
            if target == step:
                result = apply_patch(snapshot, roster, patch, allow_roster=True)
                snapshot, roster, any_patch = result.snapshot, result.roster, True
    return (snapshot, roster) if any_patch else None


def applied_in_batches(app: Changji, store: ReadModels, batches: int) -> None:
    notifications = app.recorder.select_notifications(start=1, limit=100_000)
    events = [(n.id, app.mapper.to_domain_event(n)) for n in notifications]
    size = max(1, len(events) // batches)
    for start in range(0, len(events), size):
        store.apply(events[start : start + size])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plays())
def test_the_scene_at_every_node_is_the_fold_of_its_paths_patches_whatever_the_arrival_order(
    play: dict[str, Any],
) -> None:
    app = memory_app()
    _, nodes, recorded = played(app, play)
    with tempfile.TemporaryDirectory() as tmp:
        live = ReadModels(Path(tmp) / "live.sqlite")
        applied_in_batches(app, live, play["batches"])
        for node in nodes:
            expected = folded(app, node, recorded)
            scene = live.scene(node)
            if expected is None:
                assert scene is None
            else:
                assert scene is not None
                assert (scene.snapshot, scene.roster) == expected
        rebuilt = ReadModels(Path(tmp) / "rebuilt.sqlite")
        ProjectionRunner(app, rebuilt).rebuild()
        ProjectionRunner(app, live).index_search()
        assert rebuilt.dump() == live.dump()


def the_patches(app: Changji) -> Iterator[str]:
    for n in app.recorder.select_notifications(start=1, limit=10_000):
        yield n.topic.rsplit(":", 1)[-1]


def test_a_scribe_patch_is_recorded_once_however_often_the_job_runs() -> None:
    app = memory_app()
    story = StoryBuilder.start(app)
    _, reply = story.turn()
    call = SideCall("scribe", "m", 10, 5, 3.0, "ok")
    first = app.scenes.record_scribe_patch(reply, {"time": "夜"}, [], call)
    again = app.scenes.record_scribe_patch(reply, {"time": "昼"}, [], call)
    assert first.recorded and not again.recorded
    failed = app.jobs.record_job_failure(reply, "scribe", "late", None, None)
    assert not failed.recorded
    topics = list(the_patches(app))
    assert topics.count("ScenePatched") == 1 and topics.count("ModelCalled") == 2  # every call is paid for
