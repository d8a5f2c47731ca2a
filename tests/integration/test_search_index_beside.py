"""A rebuild's full-text index is built by a process beside the fold: every text the fold committed
is indexed, those committed while it was finishing too, and the index is the one built in process."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from domain.application import Changji
from projections.read_models import search_index
from projections.read_models.search_index import IndexerBeside, index_beside
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder


def texts(store: ReadModels) -> int:
    return int(store.writer.execute("select count(*) from node_texts").fetchone()[0])


def test_a_rebuild_indexes_every_text_in_a_process_of_its_own_as_the_live_runner_does(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, runner: ProjectionRunner, tmp_path: Path
) -> None:
    _, reply = sqlite_story.turns(12)[-1]
    sqlite_story.annotate(reply, "revise", "改过的回复", "typo")  # a text indexed again
    runner.catch_up()
    runner.index_search()
    rebuilt = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "rebuilt.sqlite"))
    rebuilt.rebuild()
    assert rebuilt.indexed_beside >= texts(rebuilt.store) > 20  # all of them (one changed twice, twice)
    assert rebuilt.store.texts_to_index() == 0
    assert rebuilt.store.dump() == runner.store.dump()
    hits = rebuilt.store.search(sqlite_story.story_id, "改过")
    assert [h.node_id for h in hits] == [str(reply)]


def test_texts_committed_as_the_fold_finishes_are_indexed_before_the_indexer_stops(
    sqlite_story: StoryBuilder, runner: ProjectionRunner
) -> None:
    sqlite_story.turns(3)
    runner.catch_up()
    calls = []

    def done(pause: float) -> bool:  # the fold's last batch lands just before it says it is done
        calls.append(pause)
        if len(calls) == 1:
            sqlite_story.turns(2)
            runner.catch_up()
        return len(calls) >= 1

    indexed = index_beside(runner.store.path, done, batch=4)
    assert indexed == texts(runner.store) and runner.store.texts_to_index() == 0
    assert len(calls) == 1


def test_an_indexer_that_cannot_start_counts_nothing_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=search_index.__name__):
        indexer = IndexerBeside(str(tmp_path / "no such folder" / "read_models.sqlite"))
        assert indexer.join() == 0
    assert "stopped (exit code 1)" in caplog.text


def test_a_rebuild_whose_indexer_failed_indexes_the_texts_itself(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqlite_story.turns(3)
    (tmp_path / "sitecustomize.py").write_text("raise SystemExit(3)\n")  # what Python runs as it starts
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # (in the indexer's process only)
    rebuilt = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "rebuilt.sqlite"))
    rebuilt.rebuild()
    assert rebuilt.indexed_beside == 0 and rebuilt.store.texts_to_index() == 0
    assert len(rebuilt.store.search(sqlite_story.story_id, "天气")) == 3


def test_a_rebuild_that_cannot_start_its_indexer_builds_the_index_itself(
    sqlite_changji: Changji,
    sqlite_story: StoryBuilder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sqlite_story.turns(3)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no python here"))  # (an embedded interpreter's)
    rebuilt = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "rebuilt.sqlite"))
    with caplog.at_level(logging.WARNING):
        rebuilt.rebuild()
    assert "built after the rebuild, not beside it" in caplog.text
    assert rebuilt.indexed_beside == 0 and rebuilt.store.texts_to_index() == 0
    assert len(rebuilt.store.search(sqlite_story.story_id, "天气")) == 3


def test_the_indexer_is_this_package_whatever_folder_it_starts_in_and_whatever_else_it_prints(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqlite_story.turns(3)
    fake = tmp_path / "checkout" / "projections" / "read_models"  # another checkout where it is started
    fake.mkdir(parents=True)
    for folder in (fake.parent, fake):
        (folder / "__init__.py").write_text("")
    (fake / "search_index.py").write_text("def main():\n    print(999)\n")
    monkeypatch.chdir(fake.parent.parent)
    (tmp_path / "sitecustomize.py").write_text("print('a greeting at every start')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    rebuilt = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "rebuilt.sqlite"))
    rebuilt.rebuild()
    assert rebuilt.indexed_beside == texts(rebuilt.store) and rebuilt.store.texts_to_index() == 0
