"""Scene state cost against history length (invariant 5 for the scene read model).

For stories of 1k and 10k turns (with regenerates and side branches) whose every reply on the main path
carries a scribe patch, measures:

- `patch_fold_ms_<n>`: folding one more turn into the read models (the user node, the reply, its
  scribe patch and the scribe's ledger entry), median over the last turns;
- `scene_lookup_ms_<n>`: the scene at a new user leaf, as the context assembly reads it, median;
- `late_edit_ms_<n>`: a user's edit of the scene at the greeting, far above everything, folded once
  (it refolds every patched node below it, so it grows with the story: a one-off cost, reported);
- the 10k/1k ratios of the first two (goal: flat, about 1).

    python ops/bench/scene.py [--quick | --smoke]

--quick: 200 and 2,000 turns; --smoke: 20 and 40, the last 5 measured (the keys keep their names).
Last line: the figures as JSON (`FIGURES`).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from _common import TENANT, create_card_and_story, emit, figure_keys, log, parse_args, sized, sqlite_app, texts

from domain.tree.commands.jobs import SideCall
from domain.tree.rules.paths import walk_up
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner

CALL = SideCall("scribe", "bench-side", 900, 60, 800.0, "ok")
FULL: dict[str, Any] = {"sizes": (1000, 10_000), "measured": 200}
QUICK: dict[str, Any] = {"sizes": (200, 2000), "measured": 200}
SMOKE: dict[str, Any] = {"sizes": (20, 40), "measured": 5}
NAMES = ("1k", "10k")  # the keys keep these names at every size
FIGURES = figure_keys(
    "patch_fold_ms_{n}", "scene_lookup_ms_{n}", "late_edit_ms_{n}", "patch_fold_10k_vs_1k_ratio",
    "scene_lookup_10k_vs_1k_ratio", "smoke", n=NAMES,
)  # fmt: skip


def patch_for(turn: int) -> dict[str, object]:
    return {
        "time": f"第{turn}天",
        "location": ["灯塔", "码头", "北屿"][turn % 3],
        "characters": {"沈灯": {"affinity": turn % 40, "at": "灯塔"}, f"路人{turn % 50}": {"status": "路过"}},
        "flags": {f"t{turn % 20}": "记下"},
        "plot_threads": [f"线索{turn % 7}", f"伏笔{turn % 5}"],
    }


def measure(turns: int, folder: Path, measured: int) -> dict[str, float]:
    """Play `turns` turns live (each reply patched right after it, as the scribe does; a regenerated and
    patched sibling every 50 turns), folding every 100 turns; time the last `measured` turns' folds one by
    one, and 5 × `measured` scene lookups."""
    app = sqlite_app(folder / f"events-{turns}.sqlite")
    pool = texts()
    _, story_id, root_id = create_card_and_story(app, title=f"scene {turns}")
    runner = ProjectionRunner(app, ReadModels(folder / f"read-{turns}.sqlite"))
    tip, folds = root_id, []
    started = time.perf_counter()
    for turn in range(1, turns + 1):
        user_text, reply_text = pool.pair(turn - turns)
        user = app.stories.append_node(TENANT, story_id, uuid4(), "user", user_text, tip).node
        if turn % 50 == 0:  # a regenerate: the first answer keeps its own patch, the path moves on
            first = app.stories.append_node(TENANT, story_id, uuid4(), "reply", reply_text, user.id).node
            app.scenes.record_scribe_patch(first.id, {"location": "别处"}, [], CALL)
        reply = app.stories.append_node(TENANT, story_id, uuid4(), "reply", reply_text, user.id).node
        app.scenes.record_scribe_patch(reply.id, patch_for(turn), [], CALL)
        tip = reply.id
        if turn > turns - measured:
            t0 = time.perf_counter()
            runner.catch_up()
            folds.append(time.perf_counter() - t0)
        elif turn % 100 == 0:
            runner.catch_up()
        if turn % max(turns // 5, 1) == 0:
            log(f"  {turns}: {turn} turns played and folded, {time.perf_counter() - started:.1f}s")
    leaf = app.stories.append_node(TENANT, story_id, uuid4(), "user", "然后呢？", tip).node
    runner.catch_up()
    lookups = []
    for _ in range(5 * measured):
        t0 = time.perf_counter()
        scene = runner.store.scene_on_path(n.id for n in walk_up(app.node, leaf.id))
        lookups.append(time.perf_counter() - t0)
    assert scene is not None and scene.snapshot.time == f"第{turns}天" and scene.snapshot.location != "别处"
    app.scenes.record_scene_edit(TENANT, story_id, root_id, {"flags": {"天气": "雨"}}, [])
    t0 = time.perf_counter()
    runner.catch_up()
    late = time.perf_counter() - t0
    after = runner.store.scene(leaf.id)
    assert after is not None and after.snapshot.flags.get("天气") == "雨"
    return {
        "patch_fold_ms": statistics.median(folds) * 1000,
        "scene_lookup_ms": statistics.median(lookups) * 1000,
        "late_edit_ms": late * 1000,
    }


def main() -> None:
    args = parse_args(__doc__)
    plan = sized(args, FULL, QUICK, SMOKE)
    small, large = plan["sizes"]
    with tempfile.TemporaryDirectory() as tmp:
        results = {n: measure(n, Path(tmp), plan["measured"]) for n in (small, large)}
    figures: dict[str, float] = {}
    for n, label in zip((small, large), NAMES, strict=True):
        for key, value in results[n].items():
            figures[f"{key}_{label}"] = value
    figures["patch_fold_10k_vs_1k_ratio"] = results[large]["patch_fold_ms"] / results[small]["patch_fold_ms"]
    figures["scene_lookup_10k_vs_1k_ratio"] = results[large]["scene_lookup_ms"] / results[small]["scene_lookup_ms"]
    for key, value in figures.items():
        log(f"{key}: {value:.3f}")
    figures["smoke"] = args.smoke
    emit(figures)


if __name__ == "__main__":
    main()
